import { decodeLeaseId } from "./etcd-codec.js";

/**
 * The key layout of a lock: `<prefix><name>/<lease id in hex>`, one key per waiting or holding
 * session, ordered by create revision. With an empty prefix this is exactly what
 * `etcdctl lock <name>` writes, so Baton and etcdctl exclude each other.
 *
 * A durable record (what `coordinator.runOnce` keeps per job and slot) is the key
 * `<prefix>records:<record key with "%" and "/" escaped>`, on no lease. No `/` follows the
 * prefix in it, while every key of a lock has one right after the lock's name: so no record
 * key is a lock's key, nor lies under any lock's range (`<prefix><name>/`, which the queue and
 * `etcdctl lock` read), whatever the names.
 *
 * A semaphore or read-write lock keeps its keys under `<prefix>\xffpermits:<name>\xff`: the
 * byte 0xff is never part of a name's UTF-8, so no lock key (`<prefix><name>/...`) and no
 * record key lies in that range, no permit key under a lock's range, and the name ends at
 * the second 0xff (no name's range holds another's). Under it: `e:<lease hex>.<n>`, one entry
 * per holder or waiter, on its session's lease, ordered by create revision; `limit`, the
 * number of permits its entries use (on no lease); `token`, rewritten by every write grant of
 * a read-write lock (on no lease and never deleted: its mod revision is the newest write's
 * token).
 */

/** The text of the range every queue key of lock `name` lives under: `<prefix><name>/`. */
function lockRange(prefix: string, name: string): string {
  return `${prefix}${name}/`;
}

/** The range every queue key of lock `name` lives under: `<prefix><name>/`. */
export function lockPrefix(prefix: string, name: string): Buffer {
  return Buffer.from(lockRange(prefix, name));
}

/** This session's queue key for a lock: `<lockPrefix><lease id in lower-case hex>`. */
export function queueKey(lockPrefixKey: Buffer, leaseHex: string): Buffer {
  return Buffer.concat([lockPrefixKey, Buffer.from(leaseHex)]);
}

/**
 * This session's queue key of lock `name` (`<prefix><name>/<lease hex>`) and the lock's range
 * (`<prefix><name>/`), which shares the key's bytes: one buffer for both.
 */
export function queueKeyOf(
  prefix: string,
  name: string,
  leaseHex: string,
): { readonly key: Buffer; readonly prefix: Buffer } {
  // Hot path: see docs/hot-path.md, "etcd".
  const key = Buffer.from(lockRange(prefix, name) + leaseHex);
  // The lease hex is ASCII: one byte per character.
  return { key, prefix: key.subarray(0, key.length - leaseHex.length) };
}

/** Lease id (decimal, as etcd's gRPC API returns it) in the hex etcdctl uses (`%x`). */
export function leaseHex(leaseId: string): string {
  return decodeLeaseId(leaseId).toString(16);
}

/** The end of the range of every key starting with `prefix` (etcd's "prefix + 1"). */
export function rangeEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  // All 0xff: the range runs to the end of the key space.
  return Buffer.from([0]);
}

/** `/`, which ends a lock name in its keys: `a/<lease>` is a queue key of `a`, `a/b/<lease>` is not. */
const NAME_SEPARATOR = 0x2f;

/**
 * True when `key` is a queue key of the lock whose prefix is `lockPrefixKey`, and not a key of
 * a nested lock name (`a/b` lives under `a/` too: `a/b/<lease>` is not a waiter of `a`).
 */
export function isQueueKey(lockPrefixKey: Buffer, key: Buffer): boolean {
  if (key.length <= lockPrefixKey.length) return false;
  if (!key.subarray(0, lockPrefixKey.length).equals(lockPrefixKey)) return false;
  return !key.subarray(lockPrefixKey.length).includes(NAME_SEPARATOR);
}

/** The lease hex at the end of a queue key. */
export function leaseHexOf(lockPrefixKey: Buffer, key: Buffer): string {
  return key.subarray(lockPrefixKey.length).toString();
}

/** What starts a record's key after the prefix. */
export const RECORD_KEY_START = "records:";

/**
 * The key of record `key`: `<prefix>records:<key>`, with `%` written `%25` and `/` written
 * `%2F` (so two record keys never meet, and no `/` lies after the prefix).
 */
export function recordKey(prefix: string, key: string): Buffer {
  return Buffer.from(`${prefix}${RECORD_KEY_START}${escapeRecordKey(key)}`);
}

/** A byte no name's UTF-8 holds: it starts the permit key space and ends a name in it. */
const PERMIT_MARK = Buffer.from([0xff]);
/** What follows the first `PERMIT_MARK` after the prefix, for people reading the keys. */
const PERMIT_KEY_START = Buffer.from("permits:");

/** The range of every key of permit key `name`: `<prefix>\xffpermits:<name>\xff`. */
export function permitPrefix(prefix: string, name: string): Buffer {
  return Buffer.concat([
    Buffer.from(prefix),
    PERMIT_MARK,
    PERMIT_KEY_START,
    Buffer.from(name),
    PERMIT_MARK,
  ]);
}

/** The range of the entries (holders and waiters) of a permit key: `<permit prefix>e:`. */
export function permitEntriesPrefix(permitPrefixKey: Buffer): Buffer {
  return Buffer.concat([permitPrefixKey, ENTRIES_INFIX]);
}

/** The entry `n` of a session: `<entries prefix><lease hex>.<n>`. */
export function permitEntryKey(entriesPrefixKey: Buffer, leaseHex: string, n: number): Buffer {
  return Buffer.concat([entriesPrefixKey, Buffer.from(`${leaseHex}.${n}`)]);
}

/** The key holding the number of permits the entries of a permit key use. */
export function permitLimitKey(permitPrefixKey: Buffer): Buffer {
  return Buffer.concat([permitPrefixKey, LIMIT_SUFFIX]);
}

/** The key whose mod revision is the newest write's token (a read-write lock's). */
export function permitTokenKey(permitPrefixKey: Buffer): Buffer {
  return Buffer.concat([permitPrefixKey, TOKEN_SUFFIX]);
}

const ENTRIES_INFIX = Buffer.from("e:");
const LIMIT_SUFFIX = Buffer.from("limit");
const TOKEN_SUFFIX = Buffer.from("token");

/** What follows the first `PERMIT_MARK` after the prefix in a revocation entry's key. */
const REVOCATION_KEY_START = Buffer.from("revoked:");

/**
 * The range of the revocation entries addressed to the session of lease `leaseHex`:
 * `<prefix>\xffrevoked:<lease hex>/`. A forced release writes one entry there, on the holder's
 * own lease (it lives as long as the session it tells, and goes with it); the session's
 * renewal reads the range. No lock, permit or record key lies in it (see above).
 */
export function revocationPrefix(prefix: string, leaseHex: string): Buffer {
  return Buffer.concat([
    Buffer.from(prefix),
    PERMIT_MARK,
    REVOCATION_KEY_START,
    Buffer.from(`${leaseHex}/`),
  ]);
}

/** The revocation entry of one grant: `<revocation prefix><space>:<token>:<name>`. */
export function revocationKey(
  revocationPrefixKey: Buffer,
  space: "lock" | "permit",
  token: bigint,
  name: string,
): Buffer {
  return Buffer.concat([revocationPrefixKey, Buffer.from(`${space}:${token}:${name}`)]);
}

/**
 * Where the keys of one key space lie, for listing: every key of the space whose name starts
 * with `namePrefix` is in `[start, end)`. Lock keys are `<prefix><name>/<lease hex>` (record
 * keys lie among them, told apart by having no `/`; permit and revocation keys start with
 * 0xff, past the end); permit keys `<prefix>\xffpermits:<name>\xff...`; record keys
 * `<prefix>records:<escaped key>`.
 */
export function spaceRange(
  prefix: string,
  space: "lock" | "permit" | "record",
  namePrefix: string,
): { readonly start: Buffer; readonly end: Buffer; readonly base: Buffer } {
  if (space === "permit") {
    const base = Buffer.concat([Buffer.from(prefix), PERMIT_MARK, PERMIT_KEY_START]);
    const start = Buffer.concat([base, Buffer.from(namePrefix)]);
    return { start, end: rangeEnd(start), base };
  }
  if (space === "record") {
    const base = Buffer.from(`${prefix}${RECORD_KEY_START}`);
    const start = Buffer.concat([base, Buffer.from(escapeRecordKey(namePrefix))]);
    return { start, end: rangeEnd(start), base };
  }
  const base = Buffer.from(prefix);
  const start = Buffer.concat([base, Buffer.from(namePrefix)]);
  // With no name prefix, stop before the 0xff keys (permits, revocations) after the prefix.
  const end = namePrefix === "" ? Buffer.concat([base, PERMIT_MARK]) : rangeEnd(start);
  return { start, end, base };
}

/**
 * The name a listed key belongs to, in key space `space` whose keys start with `base` (see
 * {@link spaceRange}), or `undefined` for a key that is not of that space (a record key
 * among lock keys).
 */
export function nameOfKey(
  space: "lock" | "permit" | "record",
  base: Buffer,
  key: Buffer,
): string | undefined {
  const rest = key.subarray(base.length);
  if (space === "permit") {
    const end = rest.indexOf(PERMIT_MARK);
    return end < 0 ? undefined : rest.subarray(0, end).toString();
  }
  if (space === "record") return unescapeRecordKey(rest.toString());
  const end = rest.lastIndexOf(NAME_SEPARATOR);
  if (end < 0 || !LEASE_HEX.test(rest.subarray(end + 1).toString())) return undefined;
  return rest.subarray(0, end).toString();
}

/** What ends a queue key: a lease id in lower-case hex. */
const LEASE_HEX = /^[0-9a-f]{1,16}$/;

function escapeRecordKey(key: string): string {
  return key.replaceAll("%", "%25").replaceAll("/", "%2F");
}

function unescapeRecordKey(escaped: string): string {
  return escaped.replace(/%2F|%25/g, (code) => (code === "%2F" ? "/" : "%"));
}
