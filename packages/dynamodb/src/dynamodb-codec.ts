import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { BackendUnavailableError } from "@baton/core";
import { PARTITION_KEY } from "./dynamodb-keys.js";

/** An item as the DynamoDB API carries it: attribute name to typed value. */
export type Item = Record<string, AttributeValue>;

/**
 * Attribute names. A lock item: {@link PARTITION_KEY}, `token` (N, the fencing counter, raised
 * by every grant and never removed), and while held `session` (S, the holding session's id),
 * `owner` (S, its owner id) and, when the grant published one, `value` (S). A session item:
 * `owner`, `beat` (N, raised by every renewal), `ttl` (N, the session's TTL in ms),
 * `renewedAt` (N, the writer's wall clock in ms when it sent its last renewal: shown to
 * operators, never used to decide who holds a lock) and, after a forced release of one of
 * its locks, a revocation note ({@link REVOCATION}) per grant. A
 * record item: `value` and `version` (N, raised by every write).
 */
export const ATTR = {
  session: "session",
  owner: "owner",
  value: "value",
  token: "token",
  beat: "beat",
  ttl: "ttlMs",
  renewedAt: "renewedAt",
  version: "version",
} as const;

/**
 * A forced release's note to the holding session, kept in the holder's session item under
 * {@link revocationAttribute}: a map of `key` (S, the lock's name), `token` (N, the revoked
 * grant's token) and `reason` (S, the operator's reason). The holder's next renewal reads it
 * (the renewal returns the session item) and the renewal after removes it.
 */
export const REVOCATION = {
  prefix: "revoked:",
  key: "key",
  token: "token",
  reason: "reason",
} as const;

/** A revocation as the holder's renewal reads it. */
export interface Revocation {
  /** The session item's attribute that holds it. */
  readonly attribute: string;
  readonly key: string;
  readonly token: bigint;
  readonly reason: string;
}

/**
 * The session item's attribute of the revocation of grant `token` of lock `name`:
 * `revoked:<token>:<name>`, one per grant, so a later grant of the same name revoked before
 * the holder removed the first note gets a note of its own.
 */
export function revocationAttribute(name: string, token: bigint): string {
  return `${REVOCATION.prefix}${token}:${name}`;
}

/** The value of a revocation attribute. */
export function encodeRevocation(name: string, token: bigint, reason: string): AttributeValue {
  return {
    M: {
      [REVOCATION.key]: encodeString(name),
      [REVOCATION.token]: encodeNumber(token),
      [REVOCATION.reason]: encodeString(reason),
    },
  };
}

/**
 * The revocations in a session item (as a renewal returns it, `ReturnValues: ALL_NEW`);
 * attributes of that prefix that do not decode are skipped (nothing Baton wrote).
 */
export function decodeRevocations(item: Item | undefined): Revocation[] {
  const found: Revocation[] = [];
  for (const [attribute, value] of Object.entries(item ?? {})) {
    if (!attribute.startsWith(REVOCATION.prefix)) continue;
    const map = value.M;
    const key = map?.[REVOCATION.key]?.S;
    const token = map?.[REVOCATION.token]?.N;
    const reason = map?.[REVOCATION.reason]?.S;
    if (key === undefined || token === undefined || reason === undefined) continue;
    if (!/^[0-9]+$/.test(token)) continue;
    found.push({ attribute, key, token: BigInt(token), reason });
  }
  return found;
}

/** A DynamoDB number of a bigint (a token, a beat, a version). */
export function encodeNumber(n: bigint | number): AttributeValue {
  return { N: String(n) };
}

/** A DynamoDB string. */
export function encodeString(s: string): AttributeValue {
  return { S: s };
}

/** The key of an item: `{ pk: { S: key } }`. */
export function encodeKey(key: string): Item {
  return { [PARTITION_KEY]: { S: key } };
}

/** What a lock item says: held by a session (with its grant), or free (maybe never granted). */
export type LockState =
  | {
      readonly session: string;
      readonly ownerId: string;
      readonly token: bigint;
      readonly value?: string;
    }
  | { readonly session?: undefined; readonly token?: bigint };

/** Decodes a lock item (`undefined`: no item, a lock never granted). */
export function decodeLock(item: Item | undefined): LockState {
  if (item === undefined) return {};
  const token = item[ATTR.token] === undefined ? undefined : decodeNumber(item, ATTR.token);
  const session = item[ATTR.session]?.S;
  if (session === undefined) return token === undefined ? {} : { token };
  const ownerId = item[ATTR.owner]?.S;
  if (ownerId === undefined || token === undefined) throw malformed(ATTR.owner, item);
  const value = item[ATTR.value]?.S;
  return value === undefined ? { session, ownerId, token } : { session, ownerId, token, value };
}

/** What a session item says: its owner, its renewal counter (as written) and its TTL. */
export interface SessionState {
  readonly ownerId: string;
  /** The renewal counter, compared as written: every renewal changes it. */
  readonly beat: string;
  readonly ttlMs: number;
  /** The writer's wall clock (ms since the epoch) at its last renewal, when written. */
  readonly renewedAt?: number;
}

/** Decodes a session item (`undefined`: the session is gone). */
export function decodeSession(item: Item | undefined): SessionState | undefined {
  if (item === undefined) return undefined;
  const ownerId = item[ATTR.owner]?.S;
  const beat = item[ATTR.beat]?.N;
  const ttlMs = Number(item[ATTR.ttl]?.N);
  if (ownerId === undefined || beat === undefined || !Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    throw malformed(ATTR.beat, item);
  }
  const renewedAt = Number(item[ATTR.renewedAt]?.N);
  return Number.isSafeInteger(renewedAt) && renewedAt > 0
    ? { ownerId, beat, ttlMs, renewedAt }
    : { ownerId, beat, ttlMs };
}

/** A new session item: renewal counter 1, and `now` (wall clock, ms) as its last renewal. */
export function encodeSession(key: string, ownerId: string, ttlMs: number, now?: number): Item {
  return {
    ...encodeKey(key),
    [ATTR.owner]: encodeString(ownerId),
    [ATTR.beat]: encodeNumber(1),
    [ATTR.ttl]: encodeNumber(ttlMs),
    ...(now === undefined ? {} : { [ATTR.renewedAt]: encodeNumber(Math.floor(now)) }),
  };
}

/** The token an update returned (`ReturnValues: UPDATED_NEW`). */
export function decodeGrantedToken(attributes: Item | undefined): bigint {
  if (attributes === undefined || attributes[ATTR.token] === undefined) {
    throw malformed(ATTR.token, attributes);
  }
  return decodeNumber(attributes, ATTR.token);
}

/** A record item's value and version (`undefined`: no record). */
export function decodeRecord(
  item: Item | undefined,
): { readonly value: string; readonly version: string } | undefined {
  if (item === undefined) return undefined;
  const value = item[ATTR.value]?.S;
  if (value === undefined || item[ATTR.version] === undefined) throw malformed(ATTR.value, item);
  return { value, version: decodeNumber(item, ATTR.version).toString() };
}

/**
 * A record version as `writeRecord` receives it (the decimal of the item's `version`), or
 * `undefined` when no item can have it.
 */
export function decodeRecordVersion(version: string): bigint | undefined {
  return /^[1-9][0-9]{0,37}$/.test(version) ? BigInt(version) : undefined;
}

/** A number attribute as a bigint; a malformed item is an inconsistent answer. */
export function decodeNumber(item: Item, name: string): bigint {
  const text = item[name]?.N;
  if (text === undefined || !/^-?[0-9]+$/.test(text)) throw malformed(name, item);
  return BigInt(text);
}

function malformed(name: string, item: Item | undefined): BackendUnavailableError {
  const key = item?.[PARTITION_KEY]?.S;
  return new BackendUnavailableError(
    `the DynamoDB item ${key === undefined ? "" : `"${key}" `}has no valid "${name}": it was not written by Baton, or was changed by hand`,
  );
}
