import type {
  Holder,
  InspectedHolder,
  KeyState,
  PermitHolder,
  PermitMode,
  StoredRecord,
} from "@baton/core";

/*
 * Every wire format of the Redis and Redlock backends: what is stored under a lock's keys,
 * what the scripts (scripts.ts) answer, and what is published on a lock's channels. Each
 * format's encoder and decoder sit side by side; where a script encodes or decodes a format,
 * it uses the constants below (interpolated into its Lua source), and the TypeScript twin
 * here is what the tests check against a real server.
 */

// ---------------------------------------------------------------------------------------------
// The lock payload, stored under the lock key (keys.lock)
// ---------------------------------------------------------------------------------------------

/*
 * `<grant owner>:<grant id>\n<ownerId>[\n<value>]`.
 *
 * The first line identifies the exact grant: its owner (the session id, or `<session id>.<n>`
 * for a grant handed to wait n of that session in a line) and the fencing token for
 * `redis://`, or a per-session grant number for `redlock://`. Owner checks (renewal, release)
 * compare a prefix of it, so they are by session and grant, never by owner id alone. Owner ids
 * and values never hold control characters (core rejects them), and the value comes last, so
 * decoding is unambiguous. The acquire script writes it as
 * `ownerPrefix .. token .. payloadTail`; the release script rewrites a line entry into it.
 */

/** Ends the grant's owner in a payload or a line entry: `<grant owner>:`. */
export const OWNER_END = ":";
/** Ends each field of a payload or a line entry: the grant line, the owner id. */
export const FIELD_END = "\n";

/** The owner-check prefix of any grant of `owner` (a session or a wait): `<owner>:`. */
export function ownerPrefix(owner: string): string {
  return `${owner}${OWNER_END}`;
}

/** The owner-check prefix of one grant: `<owner>:<grantId>\n`. */
export function grantPrefix(owner: string, grantId: bigint | number): string {
  return `${owner}${OWNER_END}${grantId}${FIELD_END}`;
}

/** The part of a payload after the grant id: `\n<ownerId>[\n<value>]`. */
export function payloadTail(ownerId: string, value: string | undefined): string {
  return value === undefined
    ? `${FIELD_END}${ownerId}`
    : `${FIELD_END}${ownerId}${FIELD_END}${value}`;
}

/** A whole payload: grant `grantId` of `owner`, with the {@link payloadTail} `tail`. */
export function encodePayload(owner: string, grantId: bigint | number, tail: string): string {
  return `${owner}${OWNER_END}${grantId}${tail}`;
}

const DECIMAL = /^\d+$/;

/**
 * Decodes a stored payload into a holder. `withToken: false` (Redlock) reports token 0, since
 * the grant id there is a private counter, not a fencing token. `null` for a foreign value.
 */
export function decodePayload(payload: string, withToken: boolean): Holder | null {
  const firstBreak = payload.indexOf(FIELD_END);
  if (firstBreak < 0) return null;
  const head = payload.slice(0, firstBreak);
  const colon = head.lastIndexOf(OWNER_END);
  if (colon < 0) return null;
  const grantId = head.slice(colon + 1);
  if (!DECIMAL.test(grantId)) return null;
  const rest = payload.slice(firstBreak + 1);
  const secondBreak = rest.indexOf(FIELD_END);
  const ownerId = secondBreak < 0 ? rest : rest.slice(0, secondBreak);
  const token = withToken ? BigInt(grantId) : 0n;
  return secondBreak < 0
    ? { ownerId, token }
    : { ownerId, token, value: rest.slice(secondBreak + 1) };
}

// ---------------------------------------------------------------------------------------------
// A wait's entry in a lock's line (the sorted set keys.waiters, by arrival)
// ---------------------------------------------------------------------------------------------

/** Separates the session id from the wait's number in a wait id: `<session id>.<n>`. */
export const WAIT_NUMBER_START = ".";

/** The id of wait `n` of session `sessionId`: `<session id>.<n>`, a grant owner. */
export function waitId(sessionId: string, n: number): string {
  return `${sessionId}${WAIT_NUMBER_START}${n}`;
}

/**
 * A wait's entry in a lock's line: `<session id>.<n>:<ttl ms>\n<owner>[\n<value>]`, all a
 * release needs to grant the lock to it: the payload is the entry with the TTL replaced by
 * the token, the lease is the waiter's own TTL, and the session id names its turn channel.
 * Decoded only by the release script (`RELEASE` in scripts.ts).
 */
export function lineEntry(waitId: string, ttlMs: number, tail: string): string {
  return `${waitId}${OWNER_END}${ttlMs}${tail}`;
}

// ---------------------------------------------------------------------------------------------
// Script replies
// ---------------------------------------------------------------------------------------------

/**
 * An acquire reply is one integer: the token (>= 1) when granted; otherwise the holder's
 * remaining lease folded in as `HELD_BASE - pttl` (<= 0; `pttl` -1, a key without expiry, is
 * 0). The Lua side: `return ${HELD_BASE} - redis.call('PTTL', KEYS[1])`.
 */
export const HELD_BASE = -1;

/** The acquire reply for a lock held for another `pttl` ms (what the scripts answer). */
export function encodeHeld(pttl: number): number {
  return HELD_BASE - pttl;
}

/** Decodes an acquire script's reply: the token, or the holder's remaining lease. */
export function decodeAcquireReply(reply: unknown): { token: bigint } | { pttl: number } {
  const n = Number(reply);
  return n >= 1 ? { token: BigInt(n) } : { pttl: HELD_BASE - n };
}

/**
 * The Redlock acquire reply (`ACQUIRE_NO_TOKEN`, no counter): `GRANTED` when this node
 * granted it, otherwise {@link encodeHeld}`(pttl)` (<= 0).
 */
export const GRANTED = 1;

/** Decodes a Redlock node's acquire reply: `"granted"`, `"held"`, or `undefined` if foreign. */
export function decodeNodeAcquireReply(reply: unknown): "granted" | "held" | undefined {
  const n = Number(reply);
  return n === GRANTED ? "granted" : n <= 0 ? "held" : undefined;
}

/** In a renewal reply (one integer per key, in order): this key was renewed. */
export const RENEWED = 1;
/** In a renewal reply: this key no longer holds that grant. */
export const NOT_RENEWED = 0;

/**
 * In a renewal reply, a lock key whose grant an operator force-released: `r<reason>`, the
 * reason given (read from the lock's revocations only when the key was not renewed).
 */
export const RENEW_REVOKED = "r";

/** Decodes a renewal reply: per key, whether it was renewed. */
export function decodeRenewReply(reply: unknown): boolean[] {
  return (reply as number[]).map((n) => n === RENEWED);
}

/** One key of a renewal reply, decoded by {@link decodeRenewals}. */
export interface KeyRenewal {
  readonly renewed: boolean;
  /** A lock key: the reason its grant was force-released with, if it was. */
  readonly reason?: string;
  /** A permit key: this session's entries force-released there, with the reasons. */
  readonly revoked?: ReadonlyMap<string, string>;
}

const RENEWED_KEY: KeyRenewal = { renewed: true };
const NOT_RENEWED_KEY: KeyRenewal = { renewed: false };

/**
 * Decodes a renewal reply with what it says of forced releases: per key `RENEWED` or
 * `NOT_RENEWED`; a lock key's `r<reason>` (see {@link RENEW_REVOKED}); a permit key's
 * `{code, entry id, reason, ...}` when this session has revoked entries there.
 */
export function decodeRenewals(reply: unknown): KeyRenewal[] {
  return (reply as unknown[]).map((item) => {
    if (item === RENEWED) return RENEWED_KEY;
    if (typeof item === "string" && item.startsWith(RENEW_REVOKED)) {
      return { renewed: false, reason: item.slice(RENEW_REVOKED.length) };
    }
    if (Array.isArray(item)) {
      const revoked = new Map<string, string>();
      for (let i = 1; i + 1 < item.length; i += 2)
        revoked.set(String(item[i]), String(item[i + 1]));
      return { renewed: item[0] === RENEWED, revoked };
    }
    return NOT_RENEWED_KEY;
  });
}

/**
 * Whether a release of one key released the lock. The release scripts answer how many of
 * their keys were this grant's and are released: `1` (or `0`) for one key.
 */
export function decodeReleasedOne(reply: unknown): boolean {
  return Number(reply) === 1;
}

/**
 * Decodes the `READ_HOLDER` reply `{payload or false, pttl}`: a missing key's `GET` (Lua's
 * `false`) arrives as `null`, its PTTL as -2.
 */
export function decodeHolderReply(reply: unknown): { payload: string | null; pttl: number } {
  const [payload, pttl] = reply as [string | null | false, number];
  return { payload: typeof payload === "string" ? payload : null, pttl };
}

// ---------------------------------------------------------------------------------------------
// Inspection and forced release (redis-inspection.ts, the scripts in scripts.ts and
// permit-scripts.ts)
// ---------------------------------------------------------------------------------------------

/** The forced release scripts' reply: how many grants they freed (0: none had that token). */
export function decodeForceReleased(reply: unknown): boolean {
  return Number(reply) > 0;
}

/** The owner id in a wait's line entry (see {@link lineEntry}), or `undefined` if foreign. */
export function lineEntryOwner(entry: string): string | undefined {
  const firstBreak = entry.indexOf(FIELD_END);
  if (firstBreak < 0) return undefined;
  const rest = entry.slice(firstBreak + 1);
  const secondBreak = rest.indexOf(FIELD_END);
  return secondBreak < 0 ? rest : rest.slice(0, secondBreak);
}

/**
 * Decodes the `INSPECT_LOCK` reply `{payload or false, pttl, waiters, entry, ...}` (the
 * number of entries in the line, then the first of them in order): the lock's state, or
 * `null` when it has no holder and nobody waits.
 */
export function decodeLockInspection(reply: unknown): KeyState | null {
  const [payload, pttl, count, ...entries] = reply as [string | null, number, number, ...string[]];
  const holder = typeof payload === "string" ? decodePayload(payload, true) : null;
  const waiting = Number(count);
  if (holder === null && waiting === 0) return null;
  const holders: InspectedHolder[] =
    holder === null ? [] : [pttl >= 0 ? { ...holder, remainingMs: pttl } : holder];
  if (waiting === 0) return { holders };
  const ownerIds = entries.map(lineEntryOwner).filter((o) => o !== undefined);
  // All of them in order, or only how many when the line was longer than what was read.
  return {
    holders,
    waiters: ownerIds.length === waiting ? { count: waiting, ownerIds } : { count: waiting },
  };
}

/**
 * Decodes the `INSPECT_PERMITS` reply `{now, limit, holders, waiting, id, entry, deadline,
 * ..., entry, ...}`: server time, the stored limit, how many granted entries follow (each as
 * id, entry and its session's lease deadline, in grant order), how many entries wait, then the
 * first waiting entries in order. `null` when the key has no entry.
 */
export function decodePermitInspection(reply: unknown): KeyState | null {
  const flat = reply as (string | number)[];
  const [now, limit, granted, waiting] = flat.slice(0, 4).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  if (!(granted > 0) && !(waiting > 0)) return null;
  const holders: InspectedHolder[] = [];
  let i = 4;
  for (; i < 4 + granted * 3; i += 3) {
    const entry = decodeEntry(String(flat[i + 1]));
    if (entry === null || entry.token === undefined) continue;
    const remainingMs = Math.max(0, Number(flat[i + 2]) - now);
    const { permits, mode, token, ownerId, value } = entry;
    holders.push(
      value === undefined
        ? { ownerId, token, permits, mode, remainingMs }
        : { ownerId, token, value, permits, mode, remainingMs },
    );
  }
  const ownerIds: string[] = [];
  for (; i < flat.length; i++) {
    const entry = decodeEntry(String(flat[i]));
    if (entry !== null) ownerIds.push(entry.ownerId);
  }
  const state = { holders, limit };
  if (waiting === 0) return state;
  return {
    ...state,
    waiters: ownerIds.length === waiting ? { count: waiting, ownerIds } : { count: waiting },
  };
}

/**
 * A listing's cursor: which node of the listing (masters in address order; 0 on one node),
 * the node's SCAN cursor, and the last name the page gave from that SCAN call's batch, when it
 * gave only part of it (a batch can hold more than the page had room for):
 * `<node>.<scan cursor>` or `<node>.<scan cursor>.<last name, base64url>`. The next page
 * scans the same cursor again and gives the batch's names after that one, in sorted order: a
 * SCAN call repeated from one cursor may return its keys in another order (while the server
 * resizes its table), so a count of names already given would repeat some and skip others.
 */
export interface ListCursor {
  readonly node: number;
  readonly scan: string;
  readonly after?: string;
}

const LIST_CURSOR = /^(\d+)\.(\d+)(?:\.([A-Za-z0-9_-]+))?$/;

/** Encodes a listing cursor (see {@link ListCursor}). */
export function encodeListCursor(cursor: ListCursor): string {
  const head = `${cursor.node}.${cursor.scan}`;
  return cursor.after === undefined
    ? head
    : `${head}.${Buffer.from(cursor.after, "utf8").toString("base64url")}`;
}

/** Decodes a listing cursor, or `undefined` when it is none this backend gave. */
export function decodeListCursor(text: string): ListCursor | undefined {
  const m = LIST_CURSOR.exec(text);
  if (m === null) return undefined;
  const cursor = { node: Number(m[1]), scan: m[2] as string };
  return m[3] === undefined
    ? cursor
    : { ...cursor, after: Buffer.from(m[3], "base64url").toString("utf8") };
}

// ---------------------------------------------------------------------------------------------
// Durable records: one hash per record (recordKey in redis-keys.ts), written by WRITE_RECORD
// ---------------------------------------------------------------------------------------------

/*
 * A record is a hash of two fields: `value` (what was written) and `version` (a decimal
 * integer: the server's clock in microseconds when written, or one more than the version it
 * replaced when that is greater, so versions never restart below what a lost record had; see
 * WRITE_RECORD). The key never
 * expires. The write script's ARGV: the expected version (`NO_RECORD_EXPECTED` for "only if
 * there is none"), then the value; it answers the new version, or `RECORD_NOT_WRITTEN`.
 */

/** The hash field holding a record's value. */
export const RECORD_VALUE_FIELD = "value";
/** The hash field holding a record's version. */
export const RECORD_VERSION_FIELD = "version";
/** The write script's reply when the version did not match: nothing was written. */
export const RECORD_NOT_WRITTEN = 0;
/** The expected version that means "only if there is no record". */
export const NO_RECORD_EXPECTED = "";

/** A version as the write script stores it: a decimal integer from 1, no leading zero. */
const RECORD_VERSION = /^[1-9]\d{0,15}$/;

/**
 * The write script's ARGV for a write of `value` expecting `expected` (`null`: no record), or
 * `undefined` when `expected` is no version a record can have (nothing can match it).
 */
export function encodeRecordWrite(
  value: string,
  expected: string | null,
): [expected: string, value: string] | undefined {
  if (expected === null) return [NO_RECORD_EXPECTED, value];
  return RECORD_VERSION.test(expected) && Number.isSafeInteger(Number(expected))
    ? [expected, value]
    : undefined;
}

/**
 * Whether a record at `version` holding the value a write sent is that write (run twice, or
 * settled after a lost reply): the write expecting `expected` gives a version above it.
 * `expected` must be `null` or a version (see {@link encodeRecordWrite}).
 */
export function isRecordVersionAfter(version: string, expected: string | null): boolean {
  return expected === null || Number(version) > Number(expected);
}

/** Decodes the write script's reply: the new version, or `null` (`RECORD_NOT_WRITTEN`). */
export function decodeRecordWriteReply(reply: unknown): string | null {
  const n = Number(reply);
  if (n === RECORD_NOT_WRITTEN) return null;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new Error(`unexpected reply of the record write script: ${String(reply)}`);
  }
  return String(n);
}

/**
 * Decodes `HMGET <record key> value version`: the record, or `null` when there is none (a
 * missing key answers `[null, null]`; a hash without both fields is not a record).
 */
export function decodeRecordReply(reply: unknown): StoredRecord | null {
  const [value, version] = reply as [string | null, string | null];
  if (typeof value !== "string" || typeof version !== "string") return null;
  return { value, version };
}

// ---------------------------------------------------------------------------------------------
// Permit keys: semaphores and read-write locks (PermitKeys in redis-keys.ts, permit-scripts.ts)
// ---------------------------------------------------------------------------------------------

/*
 * The queue (`:q`) holds entry ids by arrival (score: the `:n` count at arrival); its first
 * `:g` entries are granted, the rest wait (the grant rule keeps the granted ones a prefix).
 * An entry id is its wait id, `<session id>.<n>` (see `waitId`). The entries hash (`:e`) maps
 * each entry id to `<permits>:<mode>:<token>\n<ownerId>[\n<value>]` (the token is empty while
 * it waits; a read's is the newest write's, `0` when none), each session id to its number of
 * entries, and the fields below to the key's state. The sessions set (`:s`) holds each
 * session with entries here, scored by its lease deadline in server milliseconds: a script
 * that finds a deadline passed drops that session's entries. A session's renewal raises its
 * deadline there: one command per permit key, however many entries it has.
 */

/** Entries hash field: the key's limit (its permits in all). */
export const LIMIT_FIELD = ":l";
/** Entries hash field: the permits granted, summed. */
export const HELD_FIELD = ":h";
/** Entries hash field: how many entries are granted (the first ones of the queue). */
export const GRANTED_FIELD = ":g";
/** Entries hash field: how many entries wait (the rest of the queue). */
export const WAITING_FIELD = ":w";
/** Entries hash field: how many entries ever arrived: the next one's queue score. */
export const ARRIVALS_FIELD = ":n";

/** How a mode is written in an entry (one letter). */
export const MODE_CODES: Readonly<Record<PermitMode, string>> = {
  permit: "p",
  read: "r",
  write: "w",
};

const MODES_BY_CODE: Readonly<Record<string, PermitMode>> = { p: "permit", r: "read", w: "write" };

/** An entry's value: `permits` of `mode`, `token` once granted (`undefined` while waiting). */
export function encodeEntry(
  permits: number,
  mode: PermitMode,
  token: bigint | undefined,
  tail: string,
): string {
  return `${permits}${OWNER_END}${MODE_CODES[mode]}${OWNER_END}${token ?? ""}${tail}`;
}

/** A decoded entry value (see {@link encodeEntry}). */
export interface PermitEntry {
  readonly permits: number;
  readonly mode: PermitMode;
  /** The grant's token, `undefined` while it waits. */
  readonly token: bigint | undefined;
  readonly ownerId: string;
  readonly value?: string;
}

/** Decodes an entry value, or `null` when it is not one. */
export function decodeEntry(data: string): PermitEntry | null {
  const firstBreak = data.indexOf(FIELD_END);
  if (firstBreak < 0) return null;
  const [permits, code, token, extra] = data.slice(0, firstBreak).split(OWNER_END);
  const mode = code === undefined ? undefined : MODES_BY_CODE[code];
  if (mode === undefined || permits === undefined || !DECIMAL.test(permits)) return null;
  if (token === undefined || extra !== undefined || (token !== "" && !DECIMAL.test(token))) {
    return null;
  }
  const entry = { permits: Number(permits), mode, token: token === "" ? undefined : BigInt(token) };
  const rest = data.slice(firstBreak + 1);
  const secondBreak = rest.indexOf(FIELD_END);
  return secondBreak < 0
    ? { ...entry, ownerId: rest }
    : { ...entry, ownerId: rest.slice(0, secondBreak), value: rest.slice(secondBreak + 1) };
}

/** Permit acquire reply, first element: granted; the second is the token, in decimal. */
export const PERMIT_GRANTED = 1;
/**
 * Permit acquire reply, first element: not granted (refused, or waiting in the queue); the
 * second is the time in ms until the earliest lease deadline of a session there, -1 when none.
 */
export const PERMIT_NOT_GRANTED = 0;
/** Permit acquire reply, first element: the stored limit differs; the second is that limit. */
export const PERMIT_OTHER_LIMIT = 2;

/**
 * A decoded permit acquire reply. `lost`: the session said it holds grants on the key, and
 * the store had no entry of it there (they went with the store's data, or its lease ran out).
 */
export type PermitAcquireReply = (
  | { readonly kind: "granted"; readonly token: bigint }
  | { readonly kind: "not-granted"; readonly nextDeadlineMs: number }
  | { readonly kind: "other-limit"; readonly stored: number }
) & { readonly lost: boolean };

/** Decodes the permit acquire script's reply `{code, value, lost}` (`lost`: 1 or 0). */
export function decodePermitAcquireReply(reply: unknown): PermitAcquireReply {
  const [code, value, lostFlag] = reply as [number, string | number, number | undefined];
  const lost = lostFlag === 1;
  if (code === PERMIT_GRANTED) return { kind: "granted", token: BigInt(value), lost };
  if (code === PERMIT_OTHER_LIMIT) return { kind: "other-limit", stored: Number(value), lost };
  return { kind: "not-granted", nextDeadlineMs: Number(value), lost };
}

/** Decodes the downgrade script's reply: the read's token, or `null` (not this session's write). */
export function decodeDowngradeReply(reply: unknown): bigint | null {
  return typeof reply === "string" && DECIMAL.test(reply) ? BigInt(reply) : null;
}

/** How many of the entries a permit release named were granted and are released. */
export function decodeReleasedCount(reply: unknown): number {
  return Number(reply);
}

/**
 * Decodes the permit holders script's reply `{now, id, entry, deadline, ...}` (server time
 * and lease deadlines in ms), granted entries in grant order.
 */
export function decodePermitHolders(reply: unknown): PermitHolder[] {
  const flat = reply as (string | number)[];
  const now = Number(flat[0]);
  const out: PermitHolder[] = [];
  for (let i = 1; i + 2 < flat.length; i += 3) {
    const entry = decodeEntry(String(flat[i + 1]));
    if (entry === null || entry.token === undefined) continue;
    const remainingMs = Math.max(0, Number(flat[i + 2]) - now);
    const { permits, mode, token, ownerId, value } = entry;
    out.push(
      value === undefined
        ? { ownerId, token, permits, mode, remainingMs }
        : { ownerId, token, value, permits, mode, remainingMs },
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Channel messages
// ---------------------------------------------------------------------------------------------

/*
 * The watch channel (keys.channel) wakes watchers; they read the holder again and never
 * decode the message: `g<ttl ms>` a grant, `r` a release, `1` a Redlock release.
 *
 * A turn channel (keys.turn(session id)) tells the waits of one session, in a line:
 * - `g<n>:<token>`: a release handed the lock to wait n of this session, with `token`;
 * - `b<ms>`: the wait ahead of this one was handed the lock for `ms` (look again then, in
 *   case that one is frozen);
 * - `""`, from the subscriber itself, never from Redis: it reconnected or closed, messages
 *   may have been missed: look now.
 */

/** Watch channel: a grant, `g<ttl ms>`. */
export const WATCH_GRANTED = "g";
/** Watch channel: a release. */
export const WATCH_RELEASED = "r";
/** Watch channel: a Redlock release on one node. */
export const WATCH_RELEASED_NO_TOKEN = "1";
/** Turn channel: `g<n>:<token>`, the lock handed to wait n. */
export const TURN_GRANTED = "g";
/** Turn channel: `b<ms>`, the wait ahead was handed the lock for `ms`. */
export const TURN_BEHIND = "b";

/** A decoded turn message (see above). */
export type TurnMessage =
  | { readonly kind: "granted"; readonly wait: string; readonly token: bigint }
  | { readonly kind: "behind"; readonly leaseMs: number }
  | { readonly kind: "look" };

const LOOK: TurnMessage = { kind: "look" };

/** The turn message that hands the lock to wait number `wait` with `token`. */
export function encodeTurnGranted(wait: number | string, token: bigint | number): string {
  return `${TURN_GRANTED}${wait}${OWNER_END}${token}`;
}

/** The turn message that tells the next wait the one ahead holds the lock for `leaseMs`. */
export function encodeTurnBehind(leaseMs: number): string {
  return `${TURN_BEHIND}${leaseMs}`;
}

/** Decodes a turn message; anything it does not know means "look now". */
export function decodeTurnMessage(message: string): TurnMessage {
  if (message.startsWith(TURN_GRANTED)) {
    const colon = message.indexOf(OWNER_END);
    const token = message.slice(colon + 1);
    if (colon < 0 || !DECIMAL.test(token)) return LOOK;
    return {
      kind: "granted",
      wait: message.slice(TURN_GRANTED.length, colon),
      token: BigInt(token),
    };
  }
  if (message.startsWith(TURN_BEHIND)) {
    const leaseMs = Number(message.slice(TURN_BEHIND.length));
    return leaseMs >= 0 ? { kind: "behind", leaseMs } : LOOK;
  }
  return LOOK;
}
