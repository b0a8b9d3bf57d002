import type { Holder, PermitMode } from "@baton/core";
import type { IWatchResponse } from "etcd3";

/*
 * Every wire format of the etcd adapter, encoder beside decoder: the value Baton stores in a
 * queue key, a record's value and version, and the numbers etcd's gRPC API carries as decimal strings (int64 revisions,
 * lease ids and TTLs).
 * The key layout is in etcd-keys.ts; the transactions and the reading of their replies in
 * queue-requests.ts.
 */

/** Version tag of Baton's stored value: the JSON object starts `{"baton":1`. */
export const HOLDER_VALUE_VERSION = 1;
/** How a stored value of this version starts; a value that does not is another client's. */
const HOLDER_VALUE_START = `{"baton":${HOLDER_VALUE_VERSION}`;
/** Owner id shown for a key another client wrote (e.g. `etcdctl lock`): this, then the lease hex. */
export const FOREIGN_OWNER_PREFIX = "etcd-lease:";

/**
 * What Baton stores in a queue key's value, as JSON:
 * `{"baton":1,"owner":"<owner id>","value":"<published value>","waiting":true}`. `value` only
 * when one was published; `waiting` only while the key waits in the queue (a grant rewrites
 * the key without it).
 */
interface StoredHolder {
  readonly baton: typeof HOLDER_VALUE_VERSION;
  readonly owner: string;
  readonly value?: string;
  readonly waiting?: true;
}

/** The stored value of a queue key of `ownerId` publishing `value`; `waiting` while it queues. */
export function encodeHolderValue(
  ownerId: string,
  value: string | undefined,
  waiting = false,
): Buffer {
  const stored: StoredHolder = {
    baton: HOLDER_VALUE_VERSION,
    owner: ownerId,
    ...(value === undefined ? {} : { value }),
    ...(waiting ? { waiting: true } : {}),
  };
  return Buffer.from(JSON.stringify(stored));
}

/**
 * The holder a queue key describes (`token` is the revision of its last write, `leaseHex` the
 * end of its key), or `null` for a Baton key still marked waiting (the lock is being handed to
 * it: nobody has been granted it yet). A key written by another client (e.g. `etcdctl lock`,
 * which stores an empty value) is shown with owner `etcd-lease:<lease hex>` and its raw value.
 */
export function decodeHolder(raw: Buffer, token: bigint, leaseHex: string): Holder | null {
  const text = raw.toString();
  if (text.startsWith(HOLDER_VALUE_START)) {
    try {
      const stored = JSON.parse(text) as Partial<StoredHolder>;
      if (typeof stored.owner === "string") {
        if (stored.waiting === true) return null;
        return typeof stored.value === "string"
          ? { ownerId: stored.owner, token, value: stored.value }
          : { ownerId: stored.owner, token };
      }
    } catch {
      // Not ours after all: shown as a foreign key below.
    }
  }
  const ownerId = `${FOREIGN_OWNER_PREFIX}${leaseHex}`;
  return text === "" ? { ownerId, token } : { ownerId, token, value: text };
}

/** A revision as etcd's API takes it (int64 as a decimal string). */
export function encodeRevision(revision: bigint): string {
  return revision.toString();
}

/**
 * A revision as etcd's API returns it: `header.revision`, `create_revision`, `mod_revision`
 * (int64 as a decimal string).
 */
export function decodeRevision(text: string): bigint {
  return BigInt(text);
}

/** A record's value as stored in its key: the UTF-8 bytes of the string core wrote. */
export function encodeRecordValue(value: string): Buffer {
  return Buffer.from(value, "utf8");
}

/** A record's value as read from its key. */
export function decodeRecordValue(raw: Buffer): string {
  return raw.toString("utf8");
}

/** The largest revision etcd can give (int64). */
const MAX_REVISION = 2n ** 63n - 1n;

/** A record's version: the `mod_revision` of its key, as a decimal string. */
export function encodeRecordVersion(modRevision: bigint): string {
  return encodeRevision(modRevision);
}

/**
 * The `mod_revision` a record version stands for, or `undefined` for a string no existing key
 * can have as its version: anything but a decimal from 1 to 2^63 - 1 (a key that does not
 * exist has `mod_revision` 0, so "0" must never match).
 */
export function decodeRecordVersion(version: string): bigint | undefined {
  if (!/^[1-9]\d{0,18}$/.test(version)) return undefined;
  const revision = decodeRevision(version);
  return revision <= MAX_REVISION ? revision : undefined;
}

/** A lease id as etcd's API returns it (int64 as a decimal string), e.g. for its hex in keys. */
export function decodeLeaseId(id: string): bigint {
  return BigInt(id);
}

/**
 * A lease TTL as a LeaseGrant or LeaseKeepAlive answer carries it (int64 seconds as a decimal
 * string). A keepalive answers 0 (or less) for a lease that is gone.
 */
export function decodeTtlSeconds(text: string): number {
  return Number(text);
}

/** etcd's name of a delete event in a watch response (etcd3 gives the enum's name, any case). */
const DELETE_EVENT = "DELETE";

/** True when a watch response reports a delete of a watched key. */
export function hasDelete(response: IWatchResponse): boolean {
  return response.events.some((event) => String(event.type).toUpperCase() === DELETE_EVENT);
}

/**
 * The revision up to which etcd compacted the history a cancelled watch asked for, or 0 when
 * it was cancelled for another reason.
 */
export function compactedAt(response: IWatchResponse): bigint {
  // proto3 leaves a zero out: no compact revision is "" (or missing).
  return BigInt(response.compact_revision || "0");
}

/**
 * What Baton stores in a permit entry's value, as JSON:
 * `{"baton":1,"owner":"<owner id>","permits":3,"mode":"permit","value":"<published value>"}`
 * (`value` only when one was published). A downgrade rewrites it with 1 permit, mode `read`.
 */
interface StoredPermitEntry {
  readonly baton: typeof HOLDER_VALUE_VERSION;
  readonly owner: string;
  readonly permits: number;
  readonly mode: PermitMode;
  readonly value?: string;
}

/** A permit entry's value, decoded (see {@link encodePermitEntry}). */
export interface PermitEntryValue {
  readonly ownerId: string;
  readonly permits: number;
  readonly mode: PermitMode;
  readonly value?: string;
}

/** The stored value of a permit entry. */
export function encodePermitEntry(entry: PermitEntryValue): Buffer {
  const stored: StoredPermitEntry = {
    baton: HOLDER_VALUE_VERSION,
    owner: entry.ownerId,
    permits: entry.permits,
    mode: entry.mode,
    ...(entry.value === undefined ? {} : { value: entry.value }),
  };
  return Buffer.from(JSON.stringify(stored));
}

/**
 * A permit entry's value, or `undefined` for bytes Baton did not write (the caller then
 * counts the entry as taking every permit, so a stray key never lets too many in).
 */
export function decodePermitEntry(raw: Buffer): PermitEntryValue | undefined {
  const text = raw.toString();
  if (!text.startsWith(HOLDER_VALUE_START)) return undefined;
  try {
    const stored = JSON.parse(text) as Partial<StoredPermitEntry>;
    const { owner, permits, mode, value } = stored;
    if (typeof owner !== "string" || typeof permits !== "number" || !Number.isSafeInteger(permits))
      return undefined;
    if (permits < 1 || (mode !== "permit" && mode !== "read" && mode !== "write")) return undefined;
    return typeof value === "string"
      ? { ownerId: owner, permits, mode, value }
      : { ownerId: owner, permits, mode };
  } catch {
    return undefined;
  }
}

/** A permit key's limit as stored in its `limit` key: the decimal number. */
export function encodePermitLimit(limit: number): Buffer {
  return Buffer.from(String(limit));
}

/** The limit a `limit` key holds, or `undefined` for bytes that are no positive integer. */
export function decodePermitLimit(raw: Buffer): number | undefined {
  const text = raw.toString();
  if (!/^[1-9]\d{0,15}$/.test(text)) return undefined;
  const limit = Number(text);
  return Number.isSafeInteger(limit) ? limit : undefined;
}

/** The type of a watch event: `"put"` or `"delete"` (etcd3 gives the enum's name, any case). */
export function eventType(event: IWatchResponse["events"][number]): "put" | "delete" {
  return String(event.type).toUpperCase() === DELETE_EVENT ? "delete" : "put";
}

/**
 * A queue key's value as inspection shows it: its owner (`etcd-lease:<lease hex>` for a key
 * another client wrote), its published value, and whether it still waits in the queue.
 */
export function decodeQueueEntry(
  raw: Buffer,
  leaseHex: string,
): { readonly ownerId: string; readonly value?: string; readonly waiting: boolean } {
  const text = raw.toString();
  if (text.startsWith(HOLDER_VALUE_START)) {
    try {
      const stored = JSON.parse(text) as Partial<StoredHolder>;
      if (typeof stored.owner === "string") {
        const waiting = stored.waiting === true;
        return typeof stored.value === "string"
          ? { ownerId: stored.owner, value: stored.value, waiting }
          : { ownerId: stored.owner, waiting };
      }
    } catch {
      // Not ours after all: shown as a foreign key below.
    }
  }
  const ownerId = `${FOREIGN_OWNER_PREFIX}${leaseHex}`;
  return text === "" ? { ownerId, waiting: false } : { ownerId, value: text, waiting: false };
}

/**
 * What a forced release stores in a revocation entry, as JSON:
 * `{"baton":1,"space":"lock","key":"<name>","token":"<decimal>","reason":"<text>"}`.
 */
interface StoredRevocation {
  readonly baton: typeof HOLDER_VALUE_VERSION;
  readonly space: "lock" | "permit";
  readonly key: string;
  readonly token: string;
  readonly reason: string;
}

/** A revocation entry's value, decoded (see {@link encodeRevocation}). */
export interface RevocationValue {
  readonly space: "lock" | "permit";
  readonly key: string;
  readonly token: bigint;
  readonly reason: string;
}

/** The stored value of a revocation entry. */
export function encodeRevocation(revocation: RevocationValue): Buffer {
  const stored: StoredRevocation = {
    baton: HOLDER_VALUE_VERSION,
    space: revocation.space,
    key: revocation.key,
    token: revocation.token.toString(),
    reason: revocation.reason,
  };
  return Buffer.from(JSON.stringify(stored));
}

/** A revocation entry's value, or `undefined` for bytes Baton did not write. */
export function decodeRevocation(raw: Buffer): RevocationValue | undefined {
  const text = raw.toString();
  if (!text.startsWith(HOLDER_VALUE_START)) return undefined;
  try {
    const { space, key, token, reason } = JSON.parse(text) as Partial<StoredRevocation>;
    if (space !== "lock" && space !== "permit") return undefined;
    if (typeof key !== "string" || typeof reason !== "string") return undefined;
    if (typeof token !== "string" || !/^\d{1,19}$/.test(token)) return undefined;
    return { space, key, token: BigInt(token), reason };
  } catch {
    return undefined;
  }
}

/**
 * A listing's cursor: the last key a page read (the next page starts after it) and the last
 * name it listed (not listed again when its keys go on in the next page), as base64url JSON.
 */
export function encodeListCursor(lastKey: Buffer, lastName: string | undefined): string {
  const cursor = {
    k: lastKey.toString("base64"),
    ...(lastName === undefined ? {} : { n: lastName }),
  };
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

/** A cursor of {@link encodeListCursor}, or `undefined` for a string it did not make. */
export function decodeListCursor(
  cursor: string,
): { readonly lastKey: Buffer; readonly lastName: string | undefined } | undefined {
  try {
    const { k, n } = JSON.parse(Buffer.from(cursor, "base64url").toString()) as {
      k?: unknown;
      n?: unknown;
    };
    if (typeof k !== "string" || (n !== undefined && typeof n !== "string")) return undefined;
    return { lastKey: Buffer.from(k, "base64"), lastName: n };
  } catch {
    return undefined;
  }
}

/** A lease id (decimal, as etcd's API takes it) from the hex at the end of a key. */
export function leaseIdOfHex(hex: string): string {
  return BigInt(`0x${hex}`).toString();
}
