import { createHash } from "node:crypto";
import { permitFunctions } from "./permit-functions.js";
import {
  keptTokenColumn,
  RECORD_CLOCK,
  tokenBaseSql,
  tokenFromOffsetSql,
  tokenOffsetSql,
} from "./postgres-codec.js";
import { permitChannel, type SchemaNames } from "./postgres-keys.js";

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

/** Matches this connection's token locks (see token-locks.ts) whose tag is in `tags`. */
function ownTokenLocks(tags: string): string {
  return `l.pid = pg_backend_pid() AND l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
    AND l.mode = 'ShareLock'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid::bigint = ANY(${tags})`;
}

/** The SQL Baton's sessions run, for one schema. */
export interface Statements {
  /**
   * One statement: try the advisory lock; only if granted, take the next token and record the
   * holder row. `$1` key, `$2` name, `$3` owner, `$4` value. Returns `token` (text; NULL when
   * the lock was not granted). For a grant with a value, or whose token lock could clash (see
   * token-locks.ts).
   */
  readonly acquire: Statement;
  /**
   * One statement: try the advisory lock; only if granted, take the next token and its token
   * lock (no row is written): a token-kept grant. `$1` key, `$2` tag. Returns `token` (text,
   * see postgres-codec.ts): NULL when the lock was not granted, `r<token>` when the token lock
   * was not taken (then record the holder with {@link record}), else the token.
   */
  readonly acquireTokenKept: Statement;
  /**
   * {@link acquire}, waiting: waits in the server (`pg_advisory_lock`, in PostgreSQL's queue of
   * the key) at most `$5` ms (`lock_timeout`: then it fails with 55P03 and holds nothing), then
   * takes the token and records the holder as `acquire` does. Returns `token` (text).
   * Run on the session's own connection, which it occupies while it waits.
   */
  readonly waitAcquire: Statement;
  /**
   * {@link acquireTokenKept}, waiting as {@link waitAcquire} does: `$1` key, `$2` tag, `$3` ms.
   * Returns `token` as {@link acquireTokenKept} does (never NULL).
   */
  readonly waitAcquireTokenKept: Statement;
  /**
   * Records the holder row of a grant whose token lock was not taken: `$1` key, `$2` name,
   * `$3` owner, `$4` value, `$5` token.
   */
  readonly record: Statement;
  /**
   * Unlocks those of keys `$1` (bigint[]) this connection holds, and its token locks whose tag
   * is in `$2` (bigint[]), without a warning for what it does not hold.
   */
  readonly unlockHeld: Statement;
  /** Unlocks `$1`. Returns `unlocked`. The holder row is deleted later, by `renew`. */
  readonly release: Statement;
  /**
   * Unlocks `$1` and the token lock of token `$2` (at its offset) with tag `$3`: the release of
   * a token-kept grant. Returns `unlocked` (of `$1`), one column (the token lock's unlock runs
   * in a subquery that is never pulled up).
   */
  readonly releaseTokenKept: Statement;
  /**
   * The releases of one turn in one statement: unlocks keys `$1` (bigint[]) in order, each
   * after its token lock when it has one (token `$2`, tag `$3`: int8[] and int4[], NULL for a
   * grant whose token is in its holder row). Returns `unlocked`: `t` or `f` per key, in order.
   */
  readonly releaseMany: Statement;
  /**
   * The holder of key `$1` (tag `$2`), only if its advisory lock is held right now:
   * `owner`, `token`, `value`, and `remaining_ms` (float8): the time left before the server
   * ends the holding connection for `idle_session_timeout` (its TTL, from its `sessions` row,
   * less how long the connection has been idle, from the server's activity of that backend;
   * the whole TTL while it runs a statement). NULL when the server does not tell: a session
   * registered without its TTL, or a holder connected as another role, whose activity only a
   * superuser or a member of `pg_read_all_stats` may read.
   */
  readonly holder: Statement;
  /**
   * The renewal: returns which of keys `$1` (bigint[]) this connection no longer holds (rows of
   * `key`), and deletes this connection's holder rows of released keys `$2` with tokens `$3`.
   */
  readonly renew: Statement;
  /**
   * Run once as a session opens: sets `idle_session_timeout` to `$1` ms and registers this
   * connection's owner `$2` and TTL `$1` (replacing what an earlier connection with the same
   * pid left). Returns `pid`.
   */
  readonly register: Statement;
  /**
   * {@link register} for a `sessions` table made before it had its TTL column: registers the
   * owner only (holder() then cannot tell this session's time left).
   */
  readonly registerWithoutTtl: Statement;
  /**
   * Run as a session closes: deletes its holder rows of keys `$1` (bigint[]) with tokens `$2`,
   * and its registration.
   */
  readonly unregister: Statement;
  /** The durable record `$1` (text): `value`, `version` (text); no row when there is none. */
  readonly readRecord: Statement;
  /**
   * Creates record `$1` with value `$2` only if there is none (one statement: a concurrent
   * creator of the same key waits for the first and then writes nothing), at the version
   * {@link RECORD_CLOCK}. Returns `version` (text), no row when a record existed.
   */
  readonly createRecord: Statement;
  /**
   * Writes value `$2` to record `$1` only if its version is `$3` (bigint); the new version is
   * the greater of that plus one and {@link RECORD_CLOCK}. A concurrent writer of the same
   * version waits for the first and then finds the version changed, so exactly one of them
   * writes. Returns the new `version` (text), no row when the version did not match.
   */
  readonly updateRecord: Statement;
  /**
   * Acquires permits (see permit-functions.ts): `$1` namespace, `$2` name, `$3` limit, `$4`
   * permits, `$5` mode, `$6` the session's liveness key, `$7` owner, `$8` value, `$9` wait,
   * `$10` whether to take the liveness key first. Returns one text column (decodePermitAcquire).
   */
  readonly permitAcquire: Statement;
  /**
   * A waiter's look at its entry `$3` of key (`$1`, `$2`) of liveness key `$4`; with `$5`, a
   * poll that first drops what dead sessions left. Returns one text column (decodePermitCheck).
   */
  readonly permitCheck: Statement;
  /**
   * Releases entry `$3` of key (`$1`, `$2`) of liveness key `$4` (granted or waiting). Returns
   * `released` (boolean: it was there, granted).
   */
  readonly permitRelease: Statement;
  /**
   * Releases entries `$3` (bigint[]) of keys `$1`, `$2` (text[], element by element) of
   * liveness key `$4`: a close, and releases that failed.
   */
  readonly permitReleaseMany: Statement;
  /**
   * Turns write entry `$3` of key (`$1`, `$2`) of liveness key `$4` into a read of 1 permit.
   * Returns its token (text), NULL when it was no write grant of that session.
   */
  readonly permitDowngrade: Statement;
  /**
   * The granted entries of key (`$1`, `$2`) whose session lives (`$3`, this session's liveness
   * key, lives), in grant order: `owner`, `token` (text), `value`, `permits`, `mode`.
   */
  readonly permitHolders: Statement;
  /** Listens on the schema's permit channel (a simple query: no parameters). */
  readonly permitListen: string;
  /**
   * {@link renew} with inspection's bookkeeping (see postgres-inspection.ts), in the same
   * statement: `$1`, `$2`, `$3` as for `renew`; records the names `$5` (text[]) of held keys
   * `$4` (bigint[]) in namespace `$6` for this connection, forgets its keys `$7` (bigint[]),
   * deletes its revocations of tokens `$8` (bigint[], those the previous renewal reported).
   * Returns rows of `key`, `token`, `reason` and `name`: a key this connection no longer holds
   * (`token` NULL, as `renew`), or a revocation of this connection's grant with `token`
   * (text), other than those of `$8`: of lock `key`, or (`name` not NULL) of permit key `name`.
   */
  readonly renewOperations: Statement;
  /**
   * {@link renewOperations} with nothing to record, forget or delete (a renewal's usual case):
   * `$1`, `$2`, `$3` as for `renew`; returns rows as `renewOperations` does. One read of the
   * revocations (by pid) more than `renew`, and none of the others' writes.
   */
  readonly renewRevocations: Statement;
  /** {@link unregister}, also deleting this connection's lock names and revocations. */
  readonly unregisterOperations: Statement;
}

/**
 * The statements of inspection and forced release in the advisory mode (run by text, never
 * prepared by name, so the server plans each with its values: see postgres-inspection.ts).
 * A list takes `$1` namespace, `$2` cursor (the last key of the page before, or NULL),
 * `$3` prefix, `$4` the least string above every string with that prefix (or NULL), `$5`
 * limit, and returns `name`s in order.
 */
export interface InspectionStatements {
  /**
   * Lock names of namespace `$1` held right now by a connection that recorded them (at its
   * renewal, see {@link Statements.renewOperations}).
   */
  readonly listLocks: string;
  /** Permit keys of namespace `$1` with entries (held or waiting, of live sessions or not). */
  readonly listPermits: string;
  /** Record keys (records have no namespace: `$1` is ignored). */
  readonly listRecords: string;
  /**
   * Key `$1` (tag `$2`): one row, with the holder (`owner`, `token` text, `value`,
   * `remaining_ms` as {@link Statements.holder}; NULL when nobody holds it), `waiting` (int:
   * connections waiting for it at the server) and `waiters` (text[]: the owners of those that
   * are Baton sessions' own connections, oldest wait first).
   */
  readonly inspectLock: string;
  /**
   * Permit key (`$1`, `$2`), `$3` this session's liveness key: its entries of live sessions
   * in queue order, `owner`, `token` (text), `value`, `permits`, `mode`, `granted`, and the
   * key's `limit`.
   */
  readonly inspectPermit: string;
  /**
   * Records the revocation of the grant of key `$1` (tag `$2`) with token `$3` and reason
   * `$4`, for the connection that holds it right now, which releases it at its next renewal.
   * Returns a row when that grant is held.
   */
  readonly forceRelease: string;
  /**
   * Releases the granted entry with token `$3` of permit key (`$1`, `$2`) of a live session
   * (`$5`: this session's liveness key, alive) as its release would (waiters that now fit are
   * granted and told), and records the revocation with reason `$4` for the connection that
   * holds its liveness key. Returns `released` (boolean).
   */
  readonly forcePermit: string;
}

/**
 * The key range of a list (see {@link InspectionStatements}) on column `column`: after the
 * cursor, with the prefix; `first` is the number of the cursor's parameter.
 */
export function listRange(column: string, first: number): string {
  const [cursor, prefix, end] = [first, first + 1, first + 2];
  return `($${cursor}::text IS NULL OR ${column} > $${cursor}::text) AND ${column} >= $${prefix}::text
  AND ($${end}::text IS NULL OR ${column} < $${end}::text)`;
}

/** Builds the inspection statements for the schema objects `names`. */
export function inspectionStatements(names: SchemaNames): InspectionStatements {
  const permit = permitFunctions(names).names;
  const sequence = names.tokens.replaceAll("'", "''");
  const base = tokenBaseSql(sequence);
  /** Advisory locks on key `$1` (any mode, granted or not) and token locks of tag `$2`. */
  const locksOfKey = `l AS MATERIALIZED (SELECT l.pid, l.objsubid, l.objid, l.classid, l.granted,
    l.mode, to_jsonb(l) ->> 'waitstart' AS since FROM pg_locks l
  WHERE l.locktype = 'advisory'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND ((l.objsubid = 1 AND l.classid = (($1::bigint >> 32) & 4294967295)::oid
        AND l.objid = ($1::bigint & 4294967295)::oid)
      OR (l.objsubid = 2 AND l.granted AND l.mode = 'ShareLock' AND l.classid = $2::bigint::oid))),
p AS (SELECT l.pid FROM l WHERE l.objsubid = 1 AND l.granted AND l.mode = 'ExclusiveLock')`;
  return {
    listLocks: `WITH l AS MATERIALIZED (SELECT l.pid, l.classid, l.objid FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.mode = 'ExclusiveLock'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
SELECT DISTINCT n.name FROM ${names.lockNames} n
WHERE n.namespace = $1::text AND ${listRange("n.name", 2)}
  AND EXISTS (SELECT 1 FROM l WHERE l.pid = n.pid
    AND l.classid = ((n.key >> 32) & 4294967295)::oid AND l.objid = (n.key & 4294967295)::oid)
ORDER BY n.name LIMIT $5::int`,
    listPermits: `SELECT q.name FROM ${names.permitQueues} q
WHERE q.namespace = $1::text AND q.queued > 0 AND ${listRange("q.name", 2)}
ORDER BY q.name LIMIT $5::int`,
    listRecords: `SELECT r.key AS name FROM ${names.records} r
WHERE $1::text IS NOT NULL AND ${listRange("r.key", 2)}
ORDER BY r.key LIMIT $5::int`,
    inspectLock: `WITH ${locksOfKey},
c AS (
  SELECT h.owner, h.token, h.value FROM p JOIN ${names.holders} h ON h.key = $1::bigint AND h.pid = p.pid
  UNION ALL
  SELECT s.owner, ${tokenFromOffsetSql("a.objid", base)}, NULL
  FROM p JOIN l a ON a.pid = p.pid AND a.objsubid = 2
    JOIN ${names.sessions} s ON s.pid = p.pid),
r AS (
  SELECT (to_jsonb(s) ->> 'ttl_ms')::float8 AS ttl, a.state, a.state_change
  FROM p JOIN ${names.sessions} s ON s.pid = p.pid
    LEFT JOIN LATERAL pg_stat_get_activity(p.pid) a ON true),
h AS (SELECT c.owner, c.token, c.value FROM c ORDER BY c.token DESC LIMIT 1),
w AS (SELECT l.pid, l.since FROM l WHERE l.objsubid = 1 AND NOT l.granted)
SELECT h.owner, h.token::text AS token, h.value, (SELECT CASE r.state
    WHEN 'idle' THEN greatest(0, ceil(r.ttl - extract(epoch FROM clock_timestamp() - r.state_change) * 1000))
    WHEN 'active' THEN r.ttl END FROM r) AS remaining_ms,
  (SELECT count(*) FROM w)::int AS waiting,
  (SELECT array_agg(s.owner ORDER BY w.since, w.pid) FROM w JOIN ${names.sessions} s ON s.pid = w.pid)
    AS waiters
FROM (SELECT 1) one LEFT JOIN h ON true`,
    inspectPermit: `SELECT e.owner, e.token::text AS token, e.value, e.permits, e.mode, e.granted,
  q.permits AS "limit"
FROM ${names.permitQueues} q JOIN ${names.permits} e ON e.namespace = q.namespace AND e.name = q.name
WHERE q.namespace = $1::text AND q.name = $2::text
  AND CASE WHEN e.session = $3::bigint THEN true ELSE NOT pg_try_advisory_xact_lock_shared(e.session) END
ORDER BY e.id`,
    forcePermit: `WITH e AS MATERIALIZED (SELECT e.id, e.session FROM ${names.permits} e
  WHERE e.namespace = $1::text AND e.name = $2::text AND e.granted AND e.token = $3::bigint
    AND CASE WHEN e.session = $5::bigint THEN true ELSE NOT pg_try_advisory_xact_lock_shared(e.session) END
  ORDER BY e.id LIMIT 1),
h AS MATERIALIZED (SELECT l.pid FROM e JOIN pg_locks l
  ON l.mode = 'ExclusiveLock' AND ${locksKey("e.session")}),
r AS MATERIALIZED (SELECT ${permit.release}($1::text, $2::text, e.id, e.session) AS released FROM e),
v AS (INSERT INTO ${names.revocations} AS v (pid, token, key, reason, name)
  SELECT h.pid, $3::bigint, 0, $4::text, $2::text FROM h, r WHERE r.released
  ON CONFLICT (pid, token) DO UPDATE SET reason = EXCLUDED.reason, name = EXCLUDED.name)
SELECT coalesce((SELECT r.released FROM r), false) AS released`,
    forceRelease: `WITH ${locksOfKey},
c AS (
  SELECT p.pid, h.token FROM p JOIN ${names.holders} h ON h.key = $1::bigint AND h.pid = p.pid
  UNION ALL
  SELECT p.pid, ${tokenFromOffsetSql("a.objid", base)} FROM p JOIN l a ON a.pid = p.pid AND a.objsubid = 2),
t AS (SELECT c.pid, c.token FROM c ORDER BY c.token DESC LIMIT 1)
INSERT INTO ${names.revocations} AS r (pid, token, key, reason)
SELECT t.pid, t.token, $1::bigint, $4::text FROM t WHERE t.token = $3::bigint
ON CONFLICT (pid, token) DO UPDATE SET reason = EXCLUDED.reason
RETURNING 1 AS revoked`,
  };
}

/** Builds the statements for the schema objects `names`. */
export function statements(names: SchemaNames): Statements {
  const sequence = names.tokens.replaceAll("'", "''");
  const base = tokenBaseSql(sequence);
  const upsert = `ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, owner = EXCLUDED.owner,
    token = EXCLUDED.token, value = EXCLUDED.value, pid = EXCLUDED.pid`;
  /** Inserts (or replaces) the holder row of a key from `source` (the six columns, in order). */
  const insertHolder = (source: string) =>
    `INSERT INTO ${names.holders} AS h (key, name, owner, token, value, pid)
  ${source}
  ${upsert}`;
  /**
   * Records the holder row of token `t.token` (CTE `t`; nothing when it is NULL): `$1` key,
   * `$2` name, `$3` owner, `$4` value.
   */
  const recorded = `${insertHolder(`SELECT $1::bigint, $2::text, $3::text, t.token, $4::text, pg_backend_pid()
  FROM t WHERE t.token IS NOT NULL`)}
  RETURNING h.token`;
  /** Deletes this connection's holder rows of keys `keys` with tokens `tokens` (parameters). */
  const gc = (keys: string, tokens: string) => `DELETE FROM ${names.holders} h
  USING unnest(${keys}::bigint[], ${tokens}::bigint[]) AS r(key, token)
  WHERE h.key = r.key AND h.token = r.token AND h.pid = pg_backend_pid()`;
  /**
   * The try of lock `$1` and, only if granted, the next token (else NULL), as `token` (and
   * when the token is to be kept the sequence's start, as `base`): a subquery or a CTE named
   * `t`. As a subquery its target list has volatile functions, so PostgreSQL never pulls it up
   * into the outer query (which would evaluate them once per reference): they run once.
   */
  // Hot path: see docs/hot-path.md, "PostgreSQL".
  const tried = (keepToken: boolean) => `SELECT CASE WHEN pg_try_advisory_lock($1::bigint)
  THEN nextval('${sequence}') END AS token${keepToken ? `, ${base} AS base` : ""}`;
  /**
   * CTEs `b`, `l` (the wait for lock `$1`, at most `bound` ms) and `t` (the next token, and
   * when the token is to be kept the sequence's start, as `base`).
   */
  const waited = (bound: string, keepToken: boolean) =>
    `b AS MATERIALIZED (SELECT set_config('lock_timeout', ${bound}::text, true) AS bound),
l AS MATERIALIZED (SELECT pg_advisory_lock($1::bigint) AS locked FROM b),
t AS MATERIALIZED (SELECT nextval('${sequence}') AS token${keepToken ? `, ${base} AS base` : ""} FROM l)`;
  const permit = permitFunctions(names).names;
  return {
    permitAcquire: statement(
      "permit_acquire",
      `SELECT ${permit.acquire}($1::text, $2::text, $3::int, $4::int, $5::text, $6::bigint, $7::text,
  $8::text, $9::boolean, $10::boolean)`,
    ),
    permitCheck: statement(
      "permit_check",
      `SELECT ${permit.check}($1::text, $2::text, $3::bigint, $4::bigint, $5::boolean)`,
    ),
    permitRelease: statement(
      "permit_release",
      `SELECT ${permit.release}($1::text, $2::text, $3::bigint, $4::bigint)`,
    ),
    permitReleaseMany: statement(
      "permit_release_many",
      `SELECT ${permit.releaseMany}($1::text[], $2::text[], $3::bigint[], $4::bigint)`,
    ),
    permitDowngrade: statement(
      "permit_downgrade",
      `SELECT ${permit.downgrade}($1::text, $2::text, $3::bigint, $4::bigint)`,
    ),
    permitHolders: statement(
      "permit_holders",
      `SELECT e.owner, e.token::text AS token, e.value, e.permits, e.mode FROM ${names.permits} e
WHERE e.namespace = $1::text AND e.name = $2::text AND e.granted
  AND CASE WHEN e.session = $3::bigint THEN true ELSE NOT pg_try_advisory_xact_lock_shared(e.session) END
ORDER BY e.id`,
    ),
    permitListen: `LISTEN "${permitChannel(names.schema)}"`,
    waitAcquire: statement(
      "wait_acquire",
      `WITH ${waited("$5", false)},
u AS (${recorded})
SELECT (SELECT u.token::text FROM u) AS token`,
    ),
    waitAcquireTokenKept: statement(
      "wait_acquire_token_kept",
      `WITH ${waited("$3", true)}
SELECT ${keptTokenColumn("$2")} FROM t`,
    ),
    acquire: statement(
      "acquire",
      `WITH t AS MATERIALIZED (${tried(false)}),
u AS (${recorded})
SELECT (SELECT u.token::text FROM u) AS token`,
    ),
    acquireTokenKept: statement(
      "acquire_token_kept",
      `SELECT ${keptTokenColumn("$2")} FROM (${tried(true)}) t`,
    ),
    record: statement(
      "record",
      insertHolder(
        "VALUES ($1::bigint, $2::text, $3::text, $5::bigint, $4::text, pg_backend_pid())",
      ),
    ),
    release: statement("release", "SELECT pg_advisory_unlock($1::bigint) AS unlocked"),
    releaseTokenKept: statement(
      "release_token_kept",
      `SELECT pg_advisory_unlock($1::bigint) AS unlocked
FROM (SELECT pg_advisory_unlock_shared($3::int, ${tokenOffsetSql("$2::bigint", base)})) t`,
    ),
    releaseMany: statement(
      "release_many",
      `SELECT string_agg(CASE WHEN pg_advisory_unlock(r.key) THEN 't' ELSE 'f' END, '' ORDER BY r.i)
  AS unlocked
FROM (SELECT k.i, k.key, CASE WHEN k.token IS NOT NULL
    THEN pg_advisory_unlock_shared(k.tag, ${tokenOffsetSql("k.token", base)}) END AS shared
  FROM unnest($1::bigint[], $2::bigint[], $3::int[]) WITH ORDINALITY AS k(key, token, tag, i)
  OFFSET 0) r`,
    ),
    unlockHeld: statement(
      "unlock_held",
      `WITH k AS MATERIALIZED (SELECT count(pg_advisory_unlock(k.key)) AS n
  FROM unnest($1::bigint[]) AS k(key) JOIN pg_locks l
    ON l.pid = pg_backend_pid() AND l.mode = 'ExclusiveLock' AND ${locksKey("k.key")}),
t AS MATERIALIZED (SELECT count(pg_advisory_unlock_shared(l.classid::bigint::int, l.objid::bigint::int)) AS n
  FROM pg_locks l WHERE ${ownTokenLocks("$2::bigint[]")})
SELECT k.n AS keys, t.n AS tokens FROM k, t`,
    ),
    holder: statement(
      "holder",
      `WITH l AS MATERIALIZED (SELECT l.pid, l.objsubid, l.objid, l.classid FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND ((l.objsubid = 1 AND l.mode = 'ExclusiveLock'
        AND l.classid = (($1::bigint >> 32) & 4294967295)::oid
        AND l.objid = ($1::bigint & 4294967295)::oid)
      OR (l.objsubid = 2 AND l.mode = 'ShareLock' AND l.classid = $2::bigint::oid))),
p AS (SELECT l.pid FROM l WHERE l.objsubid = 1),
c AS (
  SELECT h.owner, h.token, h.value FROM p JOIN ${names.holders} h ON h.key = $1::bigint AND h.pid = p.pid
  UNION ALL
  SELECT s.owner, ${tokenFromOffsetSql("a.objid", base)}, NULL
  FROM p JOIN l a ON a.pid = p.pid AND a.objsubid = 2
    JOIN ${names.sessions} s ON s.pid = p.pid),
r AS (
  SELECT (to_jsonb(s) ->> 'ttl_ms')::float8 AS ttl, a.state, a.state_change
  FROM p JOIN ${names.sessions} s ON s.pid = p.pid
    LEFT JOIN LATERAL pg_stat_get_activity(p.pid) a ON true)
SELECT c.owner, c.token, c.value, (SELECT CASE r.state
    WHEN 'idle' THEN greatest(0, ceil(r.ttl - extract(epoch FROM clock_timestamp() - r.state_change) * 1000))
    WHEN 'active' THEN r.ttl END FROM r) AS remaining_ms
FROM c ORDER BY c.token DESC LIMIT 1`,
    ),
    renew: statement(
      "renew",
      `WITH gc AS (
  ${gc("$2", "$3")})
SELECT k::text AS key FROM unnest($1::bigint[]) AS k
WHERE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND ${locksKey("k")})`,
    ),
    renewOperations: statement(
      "renew_operations",
      `WITH gc AS (
  ${gc("$2", "$3")}),
forgotten AS (DELETE FROM ${names.lockNames} n
  WHERE n.pid = pg_backend_pid() AND n.key = ANY($7::bigint[])),
named AS (INSERT INTO ${names.lockNames} AS n (pid, key, namespace, name)
  SELECT pg_backend_pid(), a.key, $6::text, a.name FROM unnest($4::bigint[], $5::text[]) AS a(key, name)
  ON CONFLICT (pid, key) DO UPDATE SET namespace = EXCLUDED.namespace, name = EXCLUDED.name),
acked AS (DELETE FROM ${names.revocations} r
  WHERE r.pid = pg_backend_pid() AND r.token = ANY($8::bigint[]))
SELECT k::text AS key, NULL::text AS token, NULL::text AS reason, NULL::text AS name
FROM unnest($1::bigint[]) AS k
WHERE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND ${locksKey("k")})
UNION ALL
SELECT r.key::text, r.token::text, r.reason, r.name FROM ${names.revocations} r
WHERE r.pid = pg_backend_pid() AND r.token <> ALL($8::bigint[])`,
    ),
    renewRevocations: statement(
      "renew_revocations",
      `WITH gc AS (
  ${gc("$2", "$3")})
SELECT k::text AS key, NULL::text AS token, NULL::text AS reason, NULL::text AS name
FROM unnest($1::bigint[]) AS k
WHERE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND ${locksKey("k")})
UNION ALL
SELECT r.key::text, r.token::text, r.reason, r.name FROM ${names.revocations} r
WHERE r.pid = pg_backend_pid()`,
    ),
    unregisterOperations: statement(
      "unregister_operations",
      `WITH gc AS (
  ${gc("$1", "$2")}),
s AS (DELETE FROM ${names.sessions} WHERE pid = pg_backend_pid()),
n AS (DELETE FROM ${names.lockNames} WHERE pid = pg_backend_pid()),
r AS (DELETE FROM ${names.revocations} WHERE pid = pg_backend_pid())
SELECT 1`,
    ),
    register: statement(
      "register",
      `WITH r AS (INSERT INTO ${names.sessions} AS s (pid, owner, ttl_ms)
  VALUES (pg_backend_pid(), $2::text, $1::int)
  ON CONFLICT (pid) DO UPDATE SET owner = EXCLUDED.owner, ttl_ms = EXCLUDED.ttl_ms)
SELECT set_config('idle_session_timeout', $1::text, false), pg_backend_pid() AS pid`,
    ),
    registerWithoutTtl: statement(
      "register",
      `WITH r AS (INSERT INTO ${names.sessions} AS s (pid, owner) VALUES (pg_backend_pid(), $2::text)
  ON CONFLICT (pid) DO UPDATE SET owner = EXCLUDED.owner)
SELECT set_config('idle_session_timeout', $1::text, false), pg_backend_pid() AS pid`,
    ),
    unregister: statement(
      "unregister",
      `WITH gc AS (
  ${gc("$1", "$2")}),
s AS (DELETE FROM ${names.sessions} WHERE pid = pg_backend_pid())
SELECT 1`,
    ),
    readRecord: statement(
      "read_record",
      `SELECT r.value, r.version::text AS version FROM ${names.records} r WHERE r.key = $1::text`,
    ),
    createRecord: statement(
      "create_record",
      `INSERT INTO ${names.records} AS r (key, value, version)
VALUES ($1::text, $2::text, ${RECORD_CLOCK})
ON CONFLICT (key) DO NOTHING
RETURNING r.version::text AS version`,
    ),
    updateRecord: statement(
      "update_record",
      `UPDATE ${names.records} AS r SET value = $2::text, version = greatest(r.version + 1, ${RECORD_CLOCK})
WHERE r.key = $1::text AND r.version = $3::bigint
RETURNING r.version::text AS version`,
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
