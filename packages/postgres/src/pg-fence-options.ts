import { ConfigError, checkOptions } from "@baton/core";
import { quoteIdentifier, quoteQualified } from "./sql-identifier.js";

/** Options of {@link pgFence}. */
export interface PgFenceOptions {
  /**
   * The fence table, `table` or `schema.table` (default `baton.fence`): one row per resource
   * with the newest token seen. Created on first use when missing; an existing table (your
   * own `job_fence`, say) is checked on first use: it needs the two columns below, the
   * resource column as its primary key (or a unique column), and defaults for any other
   * NOT NULL column.
   */
  readonly table?: string;
  /** The column of the resource name, of a text type (default `resource`). */
  readonly resourceColumn?: string;
  /** The column of the newest token, `bigint` or `numeric` (default `token`). */
  readonly tokenColumn?: string;
  /**
   * The longest, in ms, one of the fence's own transactions may wait for a row lock
   * (`lock_timeout`) or sit idle in the middle (`idle_in_transaction_session_timeout`): the
   * server then ends it and nothing of it is committed. Bounds how long a holder paused
   * inside a fenced write keeps the fence row locked, and so how long it can block the next
   * holder's raise. Set it to the lock's TTL. Default: the TTL of the lock being raised for
   * `raise()` from correctness mode, 15000 (Baton's default TTL) for `transaction()`.
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

/** {@link PgFenceOptions} after validation. */
export interface ResolvedPgFenceOptions {
  /** The quoted table name, safe to put in SQL text. */
  readonly table: string;
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
/** PostgreSQL keeps these timeouts as int milliseconds. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** Checks the options of a fence before any I/O; throws `ConfigError` naming the option. */
export function resolvePgFenceOptions(options: unknown): ResolvedPgFenceOptions {
  // Absent options are refused like any other non-object.
  checkOptions(options ?? null, "options", [...KEYS]);
  const o = options as PgFenceOptions;
  const resourceName = o.resourceColumn ?? "resource";
  const tokenName = o.tokenColumn ?? "token";
  const resource = quoteIdentifier(resourceName, "resourceColumn");
  const token = quoteIdentifier(tokenName, "tokenColumn");
  if (resource === token) {
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
    table: quoteQualified(o.table ?? "baton.fence", "table"),
    resource,
    token,
    resourceName,
    tokenName,
    timeoutMs,
    raiseOnWrite: o.raiseOnWrite ?? false,
  };
}

/**
 * The settings that bound a fence transaction, sent right after `BEGIN`. `statement` also
 * bounds each statement (only where every statement is the fence's own).
 */
export function transactionLimits(limitMs: number, statement: boolean): string {
  const ms = Math.min(Math.max(1, Math.round(limitMs)), MAX_TIMEOUT_MS);
  return [
    "BEGIN",
    `SET LOCAL lock_timeout = ${ms}`,
    `SET LOCAL idle_in_transaction_session_timeout = ${ms}`,
    ...(statement ? [`SET LOCAL statement_timeout = ${Math.min(ms * 2, MAX_TIMEOUT_MS)}`] : []),
  ].join("; ");
}
