import { ConfigError, checkOptions } from "@baton/core";
import { type QuotedTable, quoteIdentifier, quoteTable } from "./sql-identifier.js";

/** Options of {@link mysqlFence}. */
export interface MysqlFenceOptions {
  /**
   * The fence table, `table` or `database.table` (default `baton_fence`, in the connection's
   * database): one row per resource with the newest token seen. Created on first use when
   * missing; an existing table (your own `job_fence`, say) is checked on first use: it needs
   * the two columns below, the resource column as its primary key (or a unique column), and
   * defaults for any other NOT NULL column.
   */
  readonly table?: string;
  /** The column of the resource name, of a text type (default `resource`). */
  readonly resourceColumn?: string;
  /** The column of the newest token, `BIGINT` or `DECIMAL` of 19 digits or more (default `token`). */
  readonly tokenColumn?: string;
  /**
   * The longest, in ms, one of the fence's own transactions may wait for a row lock
   * (`innodb_lock_wait_timeout`) or sit idle between two statements (`wait_timeout`): the
   * server then ends it and nothing of it is committed. Both are whole seconds on the server,
   * so the value is rounded up to a second. Bounds how long a holder paused inside a fenced
   * write keeps the fence row locked, and so how long it can block the next holder's raise.
   * Set it to the lock's TTL. Default: the TTL of the lock being raised for `raise()` from
   * correctness mode, 15000 (Baton's default TTL) for `transaction()`.
   */
  readonly timeoutMs?: number;
  /**
   * What `check()` and `transaction()` do with a token newer than the fence holds, or a
   * resource with no row yet. Default `false`: refuse it with a `ConfigError` (field
   * `resource`), because a fence that nothing raised when the lock was granted lets a stale
   * holder's write through until the new holder's first write. `true`: raise the fence to
   * it, as a plain fenced store does; use it only when nothing raises the fence at
   * acquisition (no correctness mode) and that gap is acceptable.
   */
  readonly raiseOnWrite?: boolean;
}

/** {@link MysqlFenceOptions} after validation. */
export interface ResolvedMysqlFenceOptions {
  /** The table, quoted and in parts. */
  readonly table: QuotedTable;
  /** The quoted resource column. */
  readonly resource: string;
  /** The quoted token column. */
  readonly token: string;
  /** Unquoted resource and token column names, for messages and the table check. */
  readonly resourceName: string;
  readonly tokenName: string;
  readonly timeoutMs: number | undefined;
  readonly raiseOnWrite: boolean;
}

const KEYS = new Set(["table", "resourceColumn", "tokenColumn", "timeoutMs", "raiseOnWrite"]);
/** The largest `wait_timeout` MySQL and MariaDB accept: a year, in seconds. */
const MAX_TIMEOUT_S = 31_536_000;
/** The largest `timeoutMs`. */
const MAX_TIMEOUT_MS = MAX_TIMEOUT_S * 1_000;

/** Checks the options of a fence before any I/O; throws `ConfigError` naming the option. */
export function resolveMysqlFenceOptions(options: unknown): ResolvedMysqlFenceOptions {
  // Absent options are refused like any other non-object.
  checkOptions(options ?? null, "options", [...KEYS]);
  const o = options as MysqlFenceOptions;
  const resourceName = o.resourceColumn ?? "resource";
  const tokenName = o.tokenColumn ?? "token";
  const resource = quoteIdentifier(resourceName, "resourceColumn");
  const token = quoteIdentifier(tokenName, "tokenColumn");
  // Column names are case-insensitive in MySQL and MariaDB.
  if (resourceName.toLowerCase() === tokenName.toLowerCase()) {
    throw new ConfigError(
      "tokenColumn",
      `must differ from resourceColumn, both are "${tokenName}"`,
    );
  }
  const timeoutMs = o.timeoutMs;
  if (
    timeoutMs !== undefined &&
    !(Number.isSafeInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= MAX_TIMEOUT_MS)
  ) {
    throw new ConfigError(
      "timeoutMs",
      `must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${String(timeoutMs)}`,
    );
  }
  if (o.raiseOnWrite !== undefined && typeof o.raiseOnWrite !== "boolean") {
    throw new ConfigError("raiseOnWrite", `must be a boolean, got ${typeof o.raiseOnWrite}`);
  }
  return {
    table: quoteTable(o.table ?? "baton_fence", "table"),
    resource,
    token,
    resourceName,
    tokenName,
    timeoutMs,
    raiseOnWrite: o.raiseOnWrite ?? false,
  };
}

/**
 * The server's two timeouts, in whole seconds, for a fence transaction bounded by `limitMs`:
 * how long a statement waits for a row lock, and how long the connection may sit idle.
 */
export function timeoutSeconds(limitMs: number): number {
  return Math.min(Math.max(1, Math.ceil(limitMs / 1_000)), MAX_TIMEOUT_S);
}
