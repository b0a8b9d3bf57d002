import type { Holder, InspectedHolder, KeyPage, StoredRecord } from "@baton/core";

/*
 * What the row-lease and record statements (mysql-lease-statements.ts) return, decoded where
 * it is read. mysql2 is asked for big numbers as strings (`supportBigNumbers`,
 * `bigNumberStrings`): a BIGINT or DECIMAL column (a count, a time left) arrives as a decimal
 * string, a small integer as a number; tokens and versions are selected as text
 * (`CAST(... AS CHAR)`). A statement that returns no rows gives an OK packet (`affectedRows`,
 * `insertId`); several statements sent at once give an array with one result per statement.
 */

/** An OK packet: what a statement that returns no rows reports. */
export interface OkPacket {
  readonly affectedRows: number;
  readonly insertId: number | string;
}

/** A result row, keyed by column name. */
export type Row = Readonly<Record<string, unknown>>;

function isOk(value: unknown): value is OkPacket {
  return typeof value === "object" && value !== null && "affectedRows" in value;
}

function unexpected(what: string, reply: unknown): Error {
  return new Error(`unexpected ${what} reply from the server: ${JSON.stringify(reply)}`);
}

/** The OK packet of a one-statement call, or result `index` of a multi-statement one. */
export function okAt(reply: unknown, index?: number): OkPacket {
  const result = index === undefined ? reply : Array.isArray(reply) ? reply[index] : undefined;
  if (!isOk(result)) throw unexpected("statement", reply);
  return result;
}

/** The rows of the last statement of a multi-statement call (or of a one-statement one). */
export function lastRows(reply: unknown): readonly Row[] {
  if (!Array.isArray(reply)) throw unexpected("query", reply);
  const last = reply.length > 0 && Array.isArray(reply[reply.length - 1]) ? reply.at(-1) : reply;
  if (!Array.isArray(last) || last.some((row) => isOk(row))) throw unexpected("query", reply);
  return last as Row[];
}

/** A count, a flag or a time as mysql2 returns it (number, decimal string or NULL). */
function numberOrNull(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  const number = typeof value === "number" ? value : Number(value);
  return Number.isFinite(number) ? number : null;
}

/** The counter value meaning "no token was taken": the counter starts far above it. */
export const NO_TOKEN = "0";

/** What one acquire found (see `LeaseStatements.acquire`). */
export interface LeaseAcquireOutcome {
  /** The new lease's token when this call took it; `null` when the name is held. */
  readonly token: bigint | null;
  /** False when this session's row expired (or was reaped or closed). */
  readonly live: boolean;
  /** The holder's time left when another session holds the name; `null` when unknown. */
  readonly remainingMs: number | null;
  /**
   * The token of the lease that holds the name when this call did not take it (text; `null`
   * when granted or free): a new one tells a waiter that the name changed hands.
   */
  readonly holderToken: string | null;
}

/**
 * Decodes the acquire's last result: granted when the lease is this session's and carries the
 * counter value this call took (a lease of this session with another token is one an earlier,
 * abandoned call left; see `dropUnknown`).
 */
export function decodeLeaseAcquire(reply: unknown): LeaseAcquireOutcome {
  const row = lastRows(reply)[0];
  if (row === undefined) throw unexpected("acquire", reply);
  const token = row.token === null || row.token === undefined ? null : String(row.token);
  const issued = row.issued === null || row.issued === undefined ? NO_TOKEN : String(row.issued);
  const granted = numberOrNull(row.mine) === 1 && token === issued && issued !== NO_TOKEN;
  return {
    token: granted ? BigInt(issued) : null,
    live: numberOrNull(row.live) === 1,
    remainingMs: granted ? null : numberOrNull(row.remaining_ms),
    holderToken: granted ? null : token,
  };
}

/** A forced release of one of the session's leases, read by its renewal. */
export interface LeaseRevocation {
  readonly name: string;
  readonly token: bigint;
  readonly reason: string;
}

/** What a renewal found (see `LeaseStatements.renew`). */
export interface LeaseRenewal {
  /** False once the session's row expired (or was reaped or closed). */
  readonly live: boolean;
  /** Forced releases of the session's leases not yet acknowledged. */
  readonly revoked: readonly LeaseRevocation[];
}

/** Decodes a renewal's reply: the first result's `affectedRows`, the last one's rows. */
export function decodeLeaseRenewal(reply: unknown): LeaseRenewal {
  const live = okAt(reply, 0).affectedRows === 1;
  const revoked = lastRows(reply).map((row) => ({
    name: String(row.name),
    token: BigInt(String(row.token)),
    reason: String(row.reason),
  }));
  return { live, revoked };
}

/** Decodes a one-statement `DELETE` by key and token: whether it deleted the row. */
export function decodeDeleted(reply: unknown): boolean {
  return okAt(reply).affectedRows > 0;
}

/** Decodes a forced release's reply (its third result is the lease's `DELETE`). */
export function decodeForceRelease(reply: unknown): boolean {
  return okAt(reply, 2).affectedRows > 0;
}

/** Decodes the holder statement's rows: the live holder, or `null`. */
export function decodeHolder(rows: readonly Row[]): Holder | null {
  const row = rows[0];
  if (row === undefined) return null;
  const remaining = numberOrNull(row.remaining_ms);
  return {
    ownerId: String(row.owner),
    token: BigInt(String(row.token)),
    ...(row.value === null || row.value === undefined ? {} : { value: String(row.value) }),
    ...(remaining === null ? {} : { remainingMs: Math.max(0, remaining) }),
  };
}

/** {@link decodeHolder} with `held_ms`: the holder as inspection reports it. */
export function decodeInspectedHolder(rows: readonly Row[]): InspectedHolder | null {
  const holder = decodeHolder(rows);
  if (holder === null) return null;
  const held = numberOrNull(rows[0]?.held_ms);
  return held === null ? holder : { ...holder, heldMs: Math.max(0, held) };
}

/** Decodes a list page's rows (`name`): a cursor when the page is full. */
export function decodeKeyPage(rows: readonly Row[], limit: number): KeyPage {
  const keys = rows.map((row) => String(row.name));
  const last = keys[keys.length - 1];
  return keys.length === limit && last !== undefined ? { keys, cursor: last } : { keys };
}

// --- Durable records -------------------------------------------------------------------

/** Decodes a record read: `value` and `version` (text), or `null` when there is none. */
export function decodeRecord(rows: readonly Row[]): StoredRecord | null {
  const row = rows[0];
  if (row === undefined) return null;
  return { value: String(row.value), version: String(row.version) };
}

/**
 * Decodes a record write: the new version (`LAST_INSERT_ID(expr)`, which the server returns as
 * the OK packet's `insertId`), or `null` when no row matched the expected version.
 */
export function decodeWrittenVersion(reply: unknown): string | null {
  const ok = okAt(reply);
  return ok.affectedRows === 1 ? String(ok.insertId) : null;
}

/** A version as Baton writes them: a decimal of up to 20 digits (a BIGINT UNSIGNED). */
const VERSION = /^[0-9]{1,20}$/;

/**
 * Encodes an expected version for the update's `version = ?`, as a bigint (mysql2 writes it as
 * an integer literal, so the comparison is exact); `undefined` for a string that is no version
 * Baton wrote (such a write cannot match).
 */
export function encodeExpectedVersion(expected: string): bigint | undefined {
  return VERSION.test(expected) ? BigInt(expected) : undefined;
}
