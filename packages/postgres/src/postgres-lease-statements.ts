import type { SchemaNames } from "./postgres-keys.js";
import { listRange } from "./statements.js";

/**
 * The SQL of the row-lease mode, for one schema. Each is one statement, so one transaction of
 * its own: it runs unchanged through a pooler in transaction mode, which hands every
 * transaction whatever server connection is free. None is prepared by name (a named prepared
 * statement lives on one server connection, which such a pooler does not keep for a client).
 * Every expiry is on the server's clock (`clock_timestamp()`), never on a client's.
 */
export interface LeaseStatements {
  /** `$1` id, `$2` owner, `$3` TTL ms. Inserts the session row; returns `ttl_ms`. */
  readonly openSession: string;
  /**
   * `$1` id, `$2` namespace, `$3` names and `$4` tokens (text arrays) of releases that failed.
   * Pushes the session's expiry one TTL from now if it has not passed, and deletes those
   * leases. Returns `live`: 1 while the session lives, 0 once it expired (or was reaped or
   * closed).
   */
  readonly renew: string;
  /** `$1` id. Deletes the session and, by cascade, every lease it holds. */
  readonly closeSession: string;
  /**
   * `$1` namespace, `$2` name, `$3` session id, `$4` owner, `$5` value. Takes the lease if no
   * row holds it and the session lives, with the next token. Returns `token` (text; NULL when
   * held) and `live` (false: the session expired).
   */
  readonly acquire: string;
  /**
   * `$1` namespace, `$2` name. Deletes the session holding the lease when its expiry has passed
   * (its leases go with it). A renewal of that session that commits first keeps it: the delete
   * waits for the row and checks the expiry again. Returns `reaped` (a count), `remaining_ms`
   * (the holder's time left when it lives; NULL when free) and `token` (text: the lease's token
   * as it was read, NULL when free), which tells a waiter that the name changed hands.
   */
  readonly reap: string;
  /** `$1` namespace, `$2` name, `$3` session id, `$4` token. Returns a row when it released. */
  readonly release: string;
  /**
   * `$1` namespace, `$2` name. The live holder: `owner`, `token` (text), `value`, and
   * `remaining_ms`: its session's expiry less the server's clock, in the same statement.
   */
  readonly holder: string;
  /** `$1` namespace, `$2` name, `$3` session id. Deletes the session's lease of the name. */
  readonly dropUnknown: string;
  /**
   * {@link renew}, also reading the session's revocations (see postgres-inspection.ts):
   * `$1` to `$4` as for `renew`; `$5` (text[]) the tokens of revocations the previous renewal
   * reported, deleted here. Returns `live`, `dropped` and `revoked`: a JSON array of
   * `[name, token, reason]` of the session's other revocations, NULL when there are none.
   */
  readonly renewOperations: string;
  /**
   * `$1` namespace, `$2` name, `$3` token, `$4` reason. Deletes the lease of the name with that
   * token if its session lives, and records the revocation for that session's renewal.
   * Returns `released` (a count).
   */
  readonly forceRelease: string;
  /**
   * Lease names of namespace `$1` (live or not), in order: `$2` cursor, `$3` prefix, `$4`
   * the least string above that prefix's, `$5` limit (see InspectionStatements in
   * statements.ts). Returns `name`.
   */
  readonly listLocks: string;
  /**
   * {@link holder} with `held_ms` (float8): how long ago the lease was granted, by the
   * server's clock; NULL for a lease table made before it stored its grant time.
   */
  readonly inspect: string;
}

/** The statements for the objects named in `names`. */
export function leaseStatements(names: SchemaNames): LeaseStatements {
  const live = "s.expires_at > clock_timestamp()";
  const remainingMs = "ceil(extract(epoch FROM s.expires_at - clock_timestamp()) * 1000)::float8";
  return {
    openSession: `INSERT INTO ${names.leaseSessions} (id, owner, ttl, expires_at)
      VALUES ($1, $2, make_interval(secs => $3::float8 / 1000),
        clock_timestamp() + make_interval(secs => $3::float8 / 1000))
      RETURNING 1`,
    renew: `WITH me AS (
        UPDATE ${names.leaseSessions} s SET expires_at = clock_timestamp() + s.ttl
        WHERE s.id = $1 AND ${live} RETURNING s.id
      ), dropped AS (
        DELETE FROM ${names.leases} l USING me, unnest($3::text[], $4::text[]) AS r(name, token)
        WHERE l.session = me.id AND l.namespace = $2 AND l.name = r.name
          AND (r.token IS NULL OR l.token = r.token::bigint)
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM me)::int AS live, (SELECT count(*) FROM dropped)::int AS dropped`,
    closeSession: `DELETE FROM ${names.leaseSessions} WHERE id = $1`,
    acquire: `WITH me AS (
        SELECT s.id FROM ${names.leaseSessions} s WHERE s.id = $3 AND ${live}
      ), taken AS (
        INSERT INTO ${names.leases} (namespace, name, session, owner, token, value)
        SELECT $1, $2, me.id, $4, nextval('${names.tokens.replaceAll("'", "''")}'), $5 FROM me
        ON CONFLICT (namespace, name) DO NOTHING
        RETURNING token
      )
      SELECT (SELECT token::text FROM taken) AS token, EXISTS (SELECT 1 FROM me) AS live`,
    reap: `WITH h AS (
        SELECT l.session, l.token FROM ${names.leases} l WHERE l.namespace = $1 AND l.name = $2
      ), gone AS (
        DELETE FROM ${names.leaseSessions} s USING h
        WHERE s.id = h.session AND s.expires_at <= clock_timestamp()
        RETURNING s.id
      )
      SELECT (SELECT count(*) FROM gone)::int AS reaped,
        (SELECT ${remainingMs} FROM ${names.leaseSessions} s, h WHERE s.id = h.session AND ${live})
          AS remaining_ms,
        (SELECT h.token::text FROM h) AS token`,
    release: `DELETE FROM ${names.leases}
      WHERE namespace = $1 AND name = $2 AND session = $3 AND token = $4::bigint RETURNING 1`,
    holder: `SELECT l.owner, l.token::text AS token, l.value, ${remainingMs} AS remaining_ms
      FROM ${names.leases} l JOIN ${names.leaseSessions} s ON s.id = l.session
      WHERE l.namespace = $1 AND l.name = $2 AND ${live}`,
    dropUnknown: `DELETE FROM ${names.leases} WHERE namespace = $1 AND name = $2 AND session = $3`,
    renewOperations: `WITH me AS (
        UPDATE ${names.leaseSessions} s SET expires_at = clock_timestamp() + s.ttl
        WHERE s.id = $1 AND ${live} RETURNING s.id
      ), dropped AS (
        DELETE FROM ${names.leases} l USING me, unnest($3::text[], $4::text[]) AS r(name, token)
        WHERE l.session = me.id AND l.namespace = $2 AND l.name = r.name
          AND (r.token IS NULL OR l.token = r.token::bigint)
        RETURNING 1
      ), acked AS (
        DELETE FROM ${names.leaseRevocations} r WHERE r.session = $1 AND r.token = ANY($5::bigint[])
      )
      SELECT (SELECT count(*) FROM me)::int AS live, (SELECT count(*) FROM dropped)::int AS dropped,
        (SELECT json_agg(json_build_array(r.name, r.token::text, r.reason))
          FROM ${names.leaseRevocations} r WHERE r.session = $1 AND r.token <> ALL($5::bigint[]))
          AS revoked`,
    forceRelease: `WITH gone AS (
        DELETE FROM ${names.leases} l USING ${names.leaseSessions} s
        WHERE l.namespace = $1 AND l.name = $2 AND l.token = $3::bigint AND s.id = l.session
          AND ${live}
        RETURNING l.session, l.token
      ), noted AS (
        INSERT INTO ${names.leaseRevocations} (session, token, name, reason)
        SELECT gone.session, gone.token, $2, $4 FROM gone
        ON CONFLICT (session, token) DO UPDATE SET reason = EXCLUDED.reason
      )
      SELECT (SELECT count(*) FROM gone)::int AS released`,
    inspect: `SELECT l.owner, l.token::text AS token, l.value, ${remainingMs} AS remaining_ms,
        floor(extract(epoch FROM clock_timestamp() - (to_jsonb(l) ->> 'granted_at')::timestamptz)
          * 1000)::float8 AS held_ms
      FROM ${names.leases} l JOIN ${names.leaseSessions} s ON s.id = l.session
      WHERE l.namespace = $1 AND l.name = $2 AND ${live}`,
    listLocks: `SELECT l.name FROM ${names.leases} l
      WHERE l.namespace = $1::text AND ${listRange("l.name", 2)}
      ORDER BY l.name LIMIT $5::int`,
  };
}
