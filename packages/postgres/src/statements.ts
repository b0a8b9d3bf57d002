import { createHash } from "node:crypto";
import type { SchemaNames } from "./schema.js";

/** A prepared statement: `name` is unique per text, so one connection may hold many. */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

function statement(label: string, text: string): Statement {
  const digest = createHash("sha256").update(text).digest("hex").slice(0, 12);
  return { name: `baton_${label}_${digest}`, text };
}

/** Matches an advisory lock on bigint `key` (an SQL expression) in pg_locks aliased `l`. */
function locksKey(key: string): string {
  return `l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = ((${key} >> 32) & 4294967295)::oid
    AND l.objid = (${key} & 4294967295)::oid`;
}

/** The SQL Baton's sessions run, for one schema. */
export interface Statements {
  /**
   * One statement: try the advisory lock; only if granted, take the next token and record the
   * holder. `$1` key, `$2` name, `$3` owner, `$4` value. Returns `got`, `token`.
   */
  readonly acquire: Statement;
  /**
   * {@link acquire}, waiting: waits in the server (`pg_advisory_lock`, in PostgreSQL's queue of
   * the key) at most `$5` ms (`lock_timeout`: then it fails with 55P03 and holds nothing), then
   * takes the token and records the holder as `acquire` does. Returns `got` (true), `token`.
   * Run on the session's own connection, which it occupies while it waits.
   */
  readonly waitAcquire: Statement;
  /** Unlocks `$1` if this connection holds it (without a warning when it does not). */
  readonly unlockIfHeld: Statement;
  /** Unlocks `$1`. Returns `unlocked`. The holder row is deleted later, by `renew`. */
  readonly release: Statement;
  /** The holder of key `$1`, only if its advisory lock is held right now. */
  readonly holder: Statement;
  /**
   * The renewal: returns which of keys `$1` (bigint[]) this connection no longer holds (rows of
   * `key`), and deletes this connection's holder rows of released keys `$2` with tokens `$3`.
   */
  readonly renew: Statement;
}

/** Builds the statements for the schema objects `names`. */
export function statements(names: SchemaNames): Statements {
  const sequence = names.tokens.replaceAll("'", "''");
  const record = (
    from: string,
  ) => `INSERT INTO ${names.holders} AS h (key, name, owner, token, value, pid)
  SELECT $1::bigint, $2::text, $3::text, t.token, $4::text, pg_backend_pid() FROM ${from}
  ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, owner = EXCLUDED.owner,
    token = EXCLUDED.token, value = EXCLUDED.value, pid = EXCLUDED.pid
  RETURNING h.token`;
  return {
    waitAcquire: statement(
      "wait_acquire",
      `WITH b AS MATERIALIZED (SELECT set_config('lock_timeout', $5::text, true) AS bound),
l AS MATERIALIZED (SELECT pg_advisory_lock($1::bigint) AS locked FROM b),
t AS MATERIALIZED (SELECT nextval('${sequence}') AS token FROM l),
u AS (${record("t")})
SELECT true AS got, (SELECT u.token FROM u) AS token`,
    ),
    acquire: statement(
      "acquire",
      `WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1::bigint) AS got),
t AS MATERIALIZED (SELECT nextval('${sequence}') AS token FROM l WHERE l.got),
u AS (
  ${record("t")})
SELECT l.got, (SELECT u.token FROM u) AS token FROM l`,
    ),
    release: statement("release", "SELECT pg_advisory_unlock($1::bigint) AS unlocked"),
    unlockIfHeld: statement(
      "unlock_if_held",
      `SELECT pg_advisory_unlock($1::bigint) FROM pg_locks l
WHERE l.pid = pg_backend_pid() AND ${locksKey("$1::bigint")}`,
    ),
    holder: statement(
      "holder",
      `SELECT h.owner, h.token, h.value FROM ${names.holders} h
WHERE h.key = $1::bigint
  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = h.pid AND ${locksKey("h.key")})`,
    ),
    renew: statement(
      "renew",
      `WITH gc AS (
  DELETE FROM ${names.holders} h USING unnest($2::bigint[], $3::bigint[]) AS r(key, token)
  WHERE h.key = r.key AND h.token = r.token AND h.pid = pg_backend_pid())
SELECT k::text AS key FROM unnest($1::bigint[]) AS k
WHERE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND ${locksKey("k")})`,
    ),
  };
}

/**
 * Waits in the server until nobody holds key `$1` exclusively, at most `$2` ms (`lock_timeout`,
 * `0` for no bound; then it fails with 55P03). The shared lock is transaction-scoped, so it is
 * gone when this one-statement transaction ends, also when the statement is cancelled (a
 * session-level lock would survive a cancel that lands between lock and unlock). Run on a
 * waiter connection, never a session's.
 *
 * PostgreSQL queues it behind exclusive requests that came first (sessions waiting on their
 * own connections): a release that hands the lock straight to one of them does not end it.
 * Hence the bound.
 */
export const WAIT_UNTIL_FREE: Statement = statement(
  "wait",
  `WITH b AS MATERIALIZED (SELECT set_config('lock_timeout', $2::text, true) AS bound)
SELECT pg_advisory_xact_lock_shared($1::bigint) FROM b`,
);

/**
 * Takes a turn in the queue of a key, then waits like {@link WAIT_UNTIL_FREE}. In order: drops
 * queue key (`$1`, `$2`) if this connection holds it (to go to the back of its line); takes it
 * again (session-level, on this waiter connection; PostgreSQL grants it first come, first
 * served across connections); sets `idle_session_timeout` to `$5` ms, so the server ends a
 * connection whose process froze while holding it; then waits until nobody holds lock key `$3`
 * exclusively. The two waits are bounded by `lock_timeout` = `$4` ms each: when one runs out
 * the statement fails with 55P03 and the queue key may or may not be held (the next call drops
 * it). Each step reads the row of the one before it, so they run in this order.
 */
export const QUEUE_WAIT: Statement = statement(
  "queue_wait",
  `WITH u AS MATERIALIZED (SELECT count(pg_advisory_unlock($1::int, $2::int)) AS dropped
  FROM pg_locks l WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory' AND l.objsubid = 2
    AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = ($1::int::bigint & 4294967295)::oid AND l.objid = ($2::int::bigint & 4294967295)::oid),
b AS MATERIALIZED (SELECT set_config('lock_timeout', $4::text, true) AS bound FROM u),
q AS MATERIALIZED (SELECT pg_advisory_lock($1::int, $2::int) AS queued FROM b),
i AS MATERIALIZED (SELECT set_config('idle_session_timeout', $5::text, false) AS idle FROM q)
SELECT pg_advisory_xact_lock_shared($3::bigint) FROM i`,
);

/**
 * Gives up this waiter connection's turn: drops every session-level advisory lock it holds
 * (only ever a queue key) and lets it idle without a timeout again.
 */
export const QUEUE_LEAVE: Statement = statement(
  "queue_leave",
  "SELECT pg_advisory_unlock_all(), set_config('idle_session_timeout', '0', false)",
);
