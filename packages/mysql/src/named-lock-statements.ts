/**
 * The statements of the named-lock mode, built once per backend from the quoted names of its
 * tables. Every statement that has `?` placeholders is sent with mysql2's `query` (the values
 * are escaped by the client), several at a time where one round trip does more than one step.
 *
 * A lock is the server's named lock (`GET_LOCK`) on the session's own connection; the grant's
 * fencing token comes from the counter row, in the same statement that takes the lock:
 * `GET_LOCK` is evaluated in the `WHERE` of the counter's `UPDATE`, so the counter moves (and
 * `LAST_INSERT_ID(expr)` hands this connection the new value) exactly when the lock was
 * granted. Every later grant of the name comes after this one's lock is given up, so its
 * `UPDATE` of the same row runs after this one committed and takes a greater value.
 */

/** The quoted (and, where needed, database-qualified) names of the tables used. */
export interface NamedLockTables {
  /** The counter table: one row (`id`, `value`) whose value is the last token handed out. */
  readonly tokens: string;
  /** The id of the counter row in {@link NamedLockTables.tokens}. */
  readonly tokenRow: number;
  /** Who holds which named lock: one row per lock name, written with each grant. */
  readonly holders: string;
}

/** The statements of the named-lock mode (see the module comment). */
export interface NamedLockStatements {
  /**
   * Takes the lock without waiting and, when granted, its token and the holder row, in one
   * round trip and one transaction (a failure part way leaves it open: {@link releaseIfHeld}
   * rolls it back). Values: GET_LOCK name (twice), lock name, owner id, value (or
   * null). The first result's `affectedRows` is 1 when granted, its `insertId` the
   * token.
   */
  readonly acquire: string;
  /** Gives the lock up: 1 (released), 0 (another connection holds it), NULL (nobody does). */
  readonly release: string;
  /**
   * After an acquire that failed: rolls back what it left open, then gives the lock up if this
   * connection holds it (the named lock outlives the transaction).
   */
  readonly releaseIfHeld: string;
  /** The heartbeat: the connection's id (it must not change, see MysqlSession). */
  readonly heartbeat: string;
  /**
   * Deletes the holder rows of released grants (values: pairs of GET_LOCK name and token),
   * then the heartbeat. `{pairs}` is replaced by `(?, ?)` once per pair.
   */
  readonly tidyThenHeartbeat: (pairs: number) => string;
  /**
   * The holder of a lock: its row when the connection that wrote it holds the lock now, else
   * the holding connection's id alone (held by something that wrote no row). Values: GET_LOCK
   * name twice.
   */
  readonly holder: string;
  /** Waits up to `?` seconds for the lock to be free and gives it straight back: 1 when free. */
  readonly waitUntilFree: string;
}

/** Statements for `tables` (see {@link NamedLockStatements}). */
export function namedLockStatements(tables: NamedLockTables): NamedLockStatements {
  const { tokens, tokenRow, holders } = tables;
  return {
    acquire: [
      // One commit for both writes: two autocommit statements cost two log flushes.
      "START TRANSACTION;",
      `UPDATE ${tokens} SET value = LAST_INSERT_ID(value + 1) WHERE id = ${tokenRow} AND GET_LOCK(?, 0) = 1;`,
      `INSERT INTO ${holders} (lock_key, name, connection_id, owner_id, token, value)`,
      "SELECT ?, ?, CONNECTION_ID(), ?, LAST_INSERT_ID(), ? FROM DUAL WHERE ROW_COUNT() = 1",
      "ON DUPLICATE KEY UPDATE name = VALUES(name), connection_id = VALUES(connection_id),",
      "owner_id = VALUES(owner_id), token = VALUES(token), value = VALUES(value);",
      "COMMIT",
    ].join(" "),
    release: "SELECT RELEASE_LOCK(?) AS released",
    releaseIfHeld:
      "ROLLBACK; SELECT IF(IS_USED_LOCK(?) = CONNECTION_ID(), RELEASE_LOCK(?), NULL) AS released",
    heartbeat: "SELECT CONNECTION_ID() AS id",
    tidyThenHeartbeat: (pairs) =>
      `DELETE FROM ${holders} WHERE (lock_key, token) IN (${Array.from({ length: pairs }, () => "(?, ?)").join(", ")}); SELECT CONNECTION_ID() AS id`,
    holder: [
      "SELECT l.id AS connection_id, h.owner_id, h.token, h.value",
      "FROM (SELECT IS_USED_LOCK(?) AS id) l",
      `LEFT JOIN ${holders} h ON h.lock_key = ? AND h.connection_id = l.id`,
      "WHERE l.id IS NOT NULL",
    ].join(" "),
    waitUntilFree: "SELECT IF(GET_LOCK(?, ?) = 1, RELEASE_LOCK(?), 0) AS free",
  };
}
