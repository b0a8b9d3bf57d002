import { type TableNames, TOKEN_ROW } from "./mysql-keys.js";

/**
 * The SQL of the row-lease mode, for one set of tables. Every call is one round trip with
 * mysql2's `query` (values escaped by the client, several statements at once where one round
 * trip does more than one step); nothing is prepared, and nothing outlives the call on its
 * connection, so it runs unchanged through a pool, a proxy (ProxySQL) or on a Galera node.
 * Every expiry is on the server's clock in UTC (`UTC_TIMESTAMP(3)`), never on a client's nor
 * in a connection's time zone.
 */
export interface LeaseStatements {
  /**
   * Values: id, owner, TTL ms, TTL ms. Inserts the session row, then deletes a few rows of
   * sessions that expired over a minute ago (a process that ended without closing them leaves
   * them; their leases count as free already, and an acquire of the name deletes each).
   */
  readonly openSession: string;
  /**
   * The renewal, `drops` pending lease deletions and `acks` acknowledged revocations long:
   * pushes the session's expiry one TTL from now if it has not passed (the first result's
   * `affectedRows` is 1 while the session lives, 0 once it expired, was reaped or closed),
   * deletes those leases and revocations, and reads the session's other revocations (the last
   * result: rows of `name`, `token`, `reason`). Values: {@link renewValues}.
   */
  readonly renew: (drops: readonly PendingDrop[], acks: number) => string;
  /** Values: id three times. Deletes the session, its leases and its revocations. */
  readonly closeSession: string;
  /**
   * One transaction: takes the counter's next value (its row lock orders every acquire), deletes
   * the lease of the name when its session expired or is gone, inserts the lease for this
   * session if it lives and nobody holds the name, and then reads the outcome (the last result,
   * one row): `token` (the lease's token, text, NULL when free), `mine` (1 when the lease is
   * this session's), `issued` (the counter value this call took, text), `live` (1 while this
   * session lives) and `remaining_ms` (the holder's time left). Values: {@link acquireValues}.
   */
  readonly acquire: string;
  /** Values: namespace, name, session, token (a bigint). `affectedRows` 1 when it released. */
  readonly release: string;
  /**
   * The live holder: `owner`, `token` (text), `value`, `remaining_ms` (its session's expiry less
   * the server's clock) and `held_ms` (since the grant). Values: namespace, name.
   */
  readonly holder: string;
  /** Values: namespace, name, session. Deletes the session's lease of the name. */
  readonly dropUnknown: string;
  /**
   * One transaction: records the revocation of the lease with that token (its session alive)
   * and deletes the lease; the third result's `affectedRows` is 1 when it released. Values:
   * reason, namespace, name, token, namespace, name, token (tokens as bigints).
   */
  readonly forceRelease: string;
  /**
   * Live lease names of a namespace, in byte order, one page: values namespace, cursor twice,
   * prefix, prefix end twice, limit (see {@link listValues}). Returns `name`.
   */
  readonly listLocks: string;
}

/** A lease the renewal deletes: a release that failed (token), or an unknown grant (`null`). */
export interface PendingDrop {
  readonly name: string;
  readonly token: string | null;
}

/** The values of {@link LeaseStatements.renew}, in order. */
export function renewValues(
  session: string,
  namespace: string,
  drops: readonly PendingDrop[],
  acks: readonly string[],
): unknown[] {
  const values: unknown[] = [session];
  for (const drop of drops) {
    values.push(session, namespace, drop.name);
    if (drop.token !== null) values.push(BigInt(drop.token));
  }
  if (acks.length > 0)
    values.push(
      session,
      acks.map((ack) => BigInt(ack)),
    );
  values.push(session);
  return values;
}

/** The values of {@link LeaseStatements.acquire}, in order. */
export function acquireValues(
  namespace: string,
  name: string,
  session: string,
  owner: string,
  value: string | null,
): unknown[] {
  return [
    namespace,
    name,
    namespace,
    name,
    owner,
    value,
    session,
    session,
    session,
    namespace,
    name,
  ];
}

/** The range condition of a list page on `column` (values: cursor twice, prefix, end twice). */
export function listRange(column: string): string {
  return `(? IS NULL OR ${column} > ?) AND ${column} >= ? AND (? IS NULL OR ${column} < ?)`;
}

/** The values of a list statement after the namespace: cursor, prefix and its end, limit. */
export function listValues(
  namespace: string,
  cursor: string | undefined,
  prefix: string,
  end: string | null,
  limit: number,
): unknown[] {
  const after = cursor ?? null;
  return [namespace, after, after, prefix, end, end, limit];
}

/** Rows of long-expired sessions one session open deletes, at most. */
const DEAD_SESSIONS_PER_OPEN = 20;

/** The server's clock, UTC, to the millisecond. */
const NOW = "UTC_TIMESTAMP(3)";

/** Milliseconds from the server's clock to `expiry` (a DATETIME(3) in UTC), rounded up. */
function msUntil(expiry: string): string {
  return `CEILING(TIMESTAMPDIFF(MICROSECOND, ${NOW}, ${expiry}) / 1000)`;
}

/** The statements for the tables in `names`. */
export function leaseStatements(names: TableNames): LeaseStatements {
  const { leases, leaseSessions, leaseRevocations, tokens } = names;
  return {
    openSession: [
      `INSERT INTO ${leaseSessions} (id, owner, ttl_ms, expires_at)
        VALUES (?, ?, ?, ${NOW} + INTERVAL ? * 1000 MICROSECOND)`,
      `DELETE FROM ${leaseSessions} WHERE expires_at < ${NOW} - INTERVAL 1 MINUTE
        ORDER BY expires_at LIMIT ${DEAD_SESSIONS_PER_OPEN}`,
    ].join(";\n"),
    renew: (drops, acks) =>
      [
        `UPDATE ${leaseSessions} SET expires_at = ${NOW} + INTERVAL ttl_ms * 1000 MICROSECOND
          WHERE id = ? AND expires_at > ${NOW}`,
        ...drops.map(
          (drop) =>
            `DELETE FROM ${leases} WHERE session = ? AND namespace = ? AND name = ?${drop.token === null ? "" : " AND token = ?"}`,
        ),
        ...(acks > 0 ? [`DELETE FROM ${leaseRevocations} WHERE session = ? AND token IN (?)`] : []),
        `SELECT CONVERT(name USING utf8mb4) AS name, CAST(token AS CHAR) AS token, reason
          FROM ${leaseRevocations} WHERE session = ?`,
      ].join(";\n"),
    closeSession: [
      `DELETE FROM ${leaseSessions} WHERE id = ?`,
      `DELETE FROM ${leases} WHERE session = ?`,
      `DELETE FROM ${leaseRevocations} WHERE session = ?`,
    ].join(";\n"),
    acquire: [
      "START TRANSACTION",
      // First: the counter row's lock orders every acquire, so no two acquires interleave (no
      // deadlock on the lease's gap), and a lease inserted later has a greater token.
      `UPDATE ${tokens} SET value = LAST_INSERT_ID(value + 1) WHERE id = ${TOKEN_ROW}`,
      `DELETE l FROM ${leases} l LEFT JOIN ${leaseSessions} s ON s.id = l.session
        WHERE l.namespace = ? AND l.name = ? AND (s.id IS NULL OR s.expires_at <= ${NOW})`,
      `INSERT INTO ${leases} (namespace, name, session, owner, token, value, granted_at)
        SELECT ?, ?, s.id, ?, LAST_INSERT_ID(), ?, ${NOW} FROM ${leaseSessions} s
        WHERE s.id = ? AND s.expires_at > ${NOW}
        ON DUPLICATE KEY UPDATE token = token`,
      "COMMIT",
      `SELECT CAST(l.token AS CHAR) AS token, l.session = ? AS mine,
          CAST(LAST_INSERT_ID() AS CHAR) AS issued,
          (SELECT COUNT(*) FROM ${leaseSessions} m WHERE m.id = ? AND m.expires_at > ${NOW})
            AS live,
          ${msUntil("h.expires_at")} AS remaining_ms
        FROM (SELECT 1 AS one) d
        LEFT JOIN ${leases} l ON l.namespace = ? AND l.name = ?
        LEFT JOIN ${leaseSessions} h ON h.id = l.session AND h.expires_at > ${NOW}`,
    ].join(";\n"),
    release: `DELETE FROM ${leases} WHERE namespace = ? AND name = ? AND session = ? AND token = ?`,
    holder: `SELECT l.owner, CAST(l.token AS CHAR) AS token, l.value,
        ${msUntil("s.expires_at")} AS remaining_ms,
        FLOOR(TIMESTAMPDIFF(MICROSECOND, l.granted_at, ${NOW}) / 1000) AS held_ms
      FROM ${leases} l JOIN ${leaseSessions} s ON s.id = l.session
      WHERE l.namespace = ? AND l.name = ? AND s.expires_at > ${NOW}`,
    dropUnknown: `DELETE FROM ${leases} WHERE namespace = ? AND name = ? AND session = ?`,
    forceRelease: [
      "START TRANSACTION",
      `INSERT INTO ${leaseRevocations} (session, token, name, reason)
        SELECT l.session, l.token, l.name, ? FROM ${leases} l
        JOIN ${leaseSessions} s ON s.id = l.session AND s.expires_at > ${NOW}
        WHERE l.namespace = ? AND l.name = ? AND l.token = ?
        ON DUPLICATE KEY UPDATE reason = VALUES(reason)`,
      `DELETE l FROM ${leases} l
        JOIN ${leaseRevocations} r ON r.session = l.session AND r.token = l.token
        WHERE l.namespace = ? AND l.name = ? AND l.token = ?`,
      "COMMIT",
    ].join(";\n"),
    listLocks: `SELECT CONVERT(l.name USING utf8mb4) AS name FROM ${leases} l
      JOIN ${leaseSessions} s ON s.id = l.session AND s.expires_at > ${NOW}
      WHERE l.namespace = ? AND ${listRange("l.name")}
      ORDER BY l.name LIMIT ?`,
  };
}

/** The records' statements (both modes), for the tables in `names`. */
export interface RecordStatements {
  /** Values: namespace, key. Returns `value` and `version` (text). */
  readonly read: string;
  /** Values: namespace, key, value. Fails with a duplicate key when the record exists. */
  readonly create: string;
  /**
   * Values: value, namespace, key, expected version. `affectedRows` 1 when it wrote; the new
   * version is `insertId` (set by `LAST_INSERT_ID(expr)`).
   */
  readonly update: string;
  /** Record keys of a namespace, one page, as {@link LeaseStatements.listLocks}. */
  readonly list: string;
}

/** The statements of the records table, with `micros` the server's clock in microseconds. */
export function recordStatements(names: TableNames, micros: string): RecordStatements {
  const { records } = names;
  return {
    read: `SELECT value, CAST(version AS CHAR) AS version FROM ${records}
      WHERE namespace = ? AND record_key = ?`,
    create: `INSERT INTO ${records} (namespace, record_key, value, version)
      VALUES (?, ?, ?, LAST_INSERT_ID(${micros}))`,
    update: `UPDATE ${records} SET value = ?,
        version = LAST_INSERT_ID(GREATEST(version + 1, ${micros}))
      WHERE namespace = ? AND record_key = ? AND version = ?`,
    list: `SELECT CONVERT(record_key USING utf8mb4) AS name FROM ${records}
      WHERE namespace = ? AND ${listRange("record_key")}
      ORDER BY record_key LIMIT ?`,
  };
}
