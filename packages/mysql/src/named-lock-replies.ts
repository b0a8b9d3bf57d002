import type { Holder } from "@baton/core";

/**
 * The replies of the named-lock mode's statements (see named-lock-statements.ts), decoded
 * where they are read. mysql2 is asked for big numbers as strings, so a BIGINT column (a
 * token, a connection id) arrives as a string, a small one as a number.
 */

/** `affectedRows` of the counter's UPDATE when the lock was granted (the counter row moved). */
export const GRANTED_ROWS = 1;

/** `GET_LOCK` and `RELEASE_LOCK`'s reply for "done". */
export const LOCK_DONE = 1;

/** What the holder of a named lock that wrote no holder row is reported as (`Holder.foreign`). */
export const FOREIGN_HOLDER = "mysql-get-lock";

/** An OK packet: what a statement that returns no rows reports. */
interface OkPacket {
  readonly affectedRows: number;
  readonly insertId: number | string;
}

function isOk(value: unknown): value is OkPacket {
  return typeof value === "object" && value !== null && "affectedRows" in value;
}

/** One row's column `name`, or undefined. */
function column(rows: unknown, name: string): unknown {
  if (!Array.isArray(rows)) return undefined;
  const row = rows[0] as Record<string, unknown> | undefined;
  return row?.[name];
}

/** Where the counter's UPDATE is in the acquire's results (after START TRANSACTION). */
export const ACQUIRE_UPDATE = 1;

/**
 * The acquire's reply (four OK packets: START TRANSACTION, the counter's UPDATE, the holder
 * row's INSERT, COMMIT): the token when granted, `null` when another connection holds the lock.
 */
export function decodeAcquire(results: unknown): bigint | null {
  const update = Array.isArray(results) ? results[ACQUIRE_UPDATE] : undefined;
  if (!isOk(update)) throw new Error(`unexpected acquire reply: ${JSON.stringify(results)}`);
  if (update.affectedRows !== GRANTED_ROWS) return null;
  return BigInt(update.insertId);
}

/** `RELEASE_LOCK`'s reply: whether this connection held the lock and gave it up. */
export function decodeReleased(rows: unknown): boolean {
  const released = column(rows, "released");
  return released !== null && released !== undefined && Number(released) === LOCK_DONE;
}

/** The wait's reply: whether the lock was free (taken and given straight back). */
export function decodeFree(rows: unknown): boolean {
  const free = column(rows, "free");
  return free !== null && free !== undefined && Number(free) === LOCK_DONE;
}

/**
 * The heartbeat's reply: the server's connection id. Alone, the heartbeat replies with its
 * rows; after other statements sent with it, with one result per statement, its rows last.
 */
export function decodeHeartbeat(results: unknown): number {
  const last = Array.isArray(results) ? results[results.length - 1] : undefined;
  const rows = Array.isArray(last) ? last : results;
  const id = Number(column(rows, "id"));
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new Error(`unexpected heartbeat reply: ${JSON.stringify(results)}`);
  }
  return id;
}

/**
 * The holder's reply: no row (free), a row with the holder row's columns, or a row with the
 * holding connection's id alone (a connection that wrote no holder row: another program
 * using the same name, or a grant whose row is still being written).
 */
export function decodeHolder(rows: unknown): Holder | null {
  if (!Array.isArray(rows) || rows.length === 0) return null;
  const row = rows[0] as Record<string, unknown>;
  if (row.owner_id === null || row.owner_id === undefined) {
    return {
      ownerId: `connection ${String(row.connection_id)}`,
      token: 0n,
      foreign: FOREIGN_HOLDER,
    };
  }
  const value = row.value;
  return {
    ownerId: String(row.owner_id),
    token: BigInt(String(row.token)),
    ...(value === null || value === undefined ? {} : { value: String(value) }),
  };
}
