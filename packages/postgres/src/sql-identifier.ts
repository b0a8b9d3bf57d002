import { ConfigError } from "@baton/core";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Checks a plain SQL identifier (letters, digits, `_`, at most 63) and double-quotes it. */
export function quoteIdentifier(value: unknown, field: string): string {
  if (typeof value !== "string" || !IDENTIFIER.test(value)) {
    throw new ConfigError(
      field,
      `must be a plain SQL identifier (a letter or "_", then letters, digits or "_", at most 63), got ${JSON.stringify(value)}`,
    );
  }
  return `"${value}"`;
}

/** Checks `name` or `schema.name` and quotes each part. */
export function quoteQualified(value: unknown, field: string): string {
  if (typeof value !== "string") return quoteIdentifier(value, field);
  const parts = value.split(".");
  if (parts.length > 2) {
    throw new ConfigError(field, `must be "table" or "schema.table", got ${JSON.stringify(value)}`);
  }
  return parts.map((part) => quoteIdentifier(part, field)).join(".");
}
