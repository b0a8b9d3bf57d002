import { ConfigError } from "@baton/core";

/** MySQL and MariaDB names are at most 64 characters. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * Checks a plain SQL identifier (a letter or `_`, then letters, digits or `_`, at most 64)
 * and quotes it with backticks, so it is safe to put in SQL text.
 */
export function quoteIdentifier(value: unknown, field: string): string {
  if (typeof value !== "string" || !IDENTIFIER.test(value)) {
    throw new ConfigError(
      field,
      `must be a plain SQL identifier (a letter or "_", then letters, digits or "_", at most 64), got ${JSON.stringify(value)}`,
    );
  }
  return `\`${value}\``;
}

/** A table name checked and quoted: `table`, or `database.table`, each part quoted. */
export interface QuotedTable {
  /** The quoted name, safe to put in SQL text. */
  readonly sql: string;
  /** The database, unquoted, or `undefined` for the connection's current database. */
  readonly database: string | undefined;
  /** The table, unquoted. */
  readonly table: string;
}

/** Checks `table` or `database.table` and quotes each part. */
export function quoteTable(value: unknown, field: string): QuotedTable {
  // A value that is not a string is a ConfigError from quoteIdentifier.
  const text = typeof value === "string" ? value : quoteIdentifier(value, field);
  const parts = text.split(".");
  if (parts.length > 2) {
    throw new ConfigError(
      field,
      `must be "table" or "database.table", got ${JSON.stringify(text)}`,
    );
  }
  const sql = parts.map((part) => quoteIdentifier(part, field)).join(".");
  const [first, second] = parts as [string, string | undefined];
  return second === undefined
    ? { sql, database: undefined, table: first }
    : { sql, database: first, table: second };
}
