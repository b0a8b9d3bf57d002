import { createHash } from "node:crypto";
import type { Holder } from "@baton/core";

/*
 * Every wire format of the Azure Blob adapter, encoder beside decoder: a lock blob's metadata
 * (holding session, fencing counter) and body (owner id, published value), a heartbeat
 * blob's metadata, a record's body and version, and the Azure names the adapter reads from
 * replies (lease states, error codes). The blob names are in azure-blob-keys.ts.
 */

/** Metadata name of a lock blob's fencing counter (decimal). */
export const META_TOKEN = "batontoken";
/** Metadata name of the session that holds, or last held, a lock blob. */
export const META_SESSION = "batonsession";
/** Metadata name of a heartbeat's TTL, in ms (decimal): what waiters wait before judging it. */
export const META_TTL = "batonttlms";
/** Metadata name of a heartbeat's renewal count (decimal): every renewal writes a new one. */
export const META_BEAT = "batonbeat";

/** Azure's lease state of a blob under an active lease. */
export const LEASE_STATE_LEASED = "leased";
/** An infinite lease (`x-ms-lease-duration: -1`): a lock blob's lease never runs out by itself. */
export const INFINITE_LEASE = -1;
/** Break period of a stale holder's lease: 0, the lease ends at once. */
export const BREAK_AT_ONCE = 0;

/** Azure error codes the adapter tells apart (the `x-ms-error-code` of a failed request). */
export const AzureErrorCode = {
  containerNotFound: "ContainerNotFound",
  blobNotFound: "BlobNotFound",
  blobAlreadyExists: "BlobAlreadyExists",
  conditionNotMet: "ConditionNotMet",
  leaseAlreadyPresent: "LeaseAlreadyPresent",
  leaseIdMissing: "LeaseIdMissing",
} as const;

/** HTTP statuses the adapter tells apart. */
export const HttpStatus = {
  notFound: 404,
  conflict: 409,
  preconditionFailed: 412,
  forbidden: 403,
} as const;

/** What a lock blob's metadata says: the fencing counter and the session named in it. */
export interface LockMetadata {
  /** The fencing counter: the token of the latest grant, or of the grant being taken. */
  readonly token: bigint;
  /** The session that holds the lease, or last held it; `""` for a blob no session claimed. */
  readonly session: string;
}

/** The metadata of a lock blob. */
export function encodeLockMetadata(meta: LockMetadata): Record<string, string> {
  return { [META_TOKEN]: meta.token.toString(), [META_SESSION]: meta.session };
}

/**
 * The metadata of a lock blob as Azure returns it (names in lower case). A blob without a
 * readable counter (written by something else) reads as counter 0 and no session.
 */
export function decodeLockMetadata(metadata: Record<string, string> | undefined): LockMetadata {
  const token = metadata?.[META_TOKEN];
  const session = metadata?.[META_SESSION] ?? "";
  return {
    token: token !== undefined && /^\d{1,20}$/.test(token) ? BigInt(token) : 0n,
    session,
  };
}

/** Version tag of a lock blob's body: the JSON object starts `{"baton":1`. */
export const LOCK_BODY_VERSION = 1;

/**
 * A lock blob's body, as JSON: `{"baton":1,"owner":"<owner id>","value":"<published value>"}`,
 * `value` only when one was published. Owner ids and values are any strings: they go in the
 * body, not in metadata (HTTP headers: ASCII only, 8 KiB in all).
 */
interface StoredLockBody {
  readonly baton: typeof LOCK_BODY_VERSION;
  readonly owner: string;
  readonly value?: string;
}

/** The body of a lock blob held by `ownerId` publishing `value`. */
export function encodeLockBody(ownerId: string, value: string | undefined): Buffer {
  const body: StoredLockBody = {
    baton: LOCK_BODY_VERSION,
    owner: ownerId,
    ...(value === undefined ? {} : { value }),
  };
  return Buffer.from(JSON.stringify(body));
}

/**
 * The holder a leased lock blob describes, from its body and metadata, or `null` for a body
 * Baton did not write (shown as no holder: the lock is not one of Baton's).
 */
export function decodeHolder(body: Buffer, meta: LockMetadata): Holder | null {
  try {
    const parsed = JSON.parse(body.toString("utf8")) as Partial<StoredLockBody>;
    if (parsed.baton !== LOCK_BODY_VERSION || typeof parsed.owner !== "string") return null;
    return typeof parsed.value === "string"
      ? { ownerId: parsed.owner, token: meta.token, value: parsed.value }
      : { ownerId: parsed.owner, token: meta.token };
  } catch {
    return null;
  }
}

/** A heartbeat's metadata: the session's TTL and its renewal count. */
export function encodeHeartbeat(ttlMs: number, beat: number): Record<string, string> {
  return { [META_TTL]: String(ttlMs), [META_BEAT]: String(beat) };
}

/**
 * The TTL a heartbeat's metadata declares, in ms, or `fallbackMs` when it declares none (then
 * waiters wait the longer of their own TTL and this fallback).
 */
export function decodeHeartbeatTtl(
  metadata: Record<string, string> | undefined,
  fallbackMs: number,
): number {
  const text = metadata?.[META_TTL];
  const ttl = text !== undefined && /^\d{1,10}$/.test(text) ? Number(text) : Number.NaN;
  return Number.isSafeInteger(ttl) && ttl > 0 ? ttl : fallbackMs;
}

/**
 * Metadata names of a forced release's notes on the holder's heartbeat:
 * `batonrevoked_<16 hex digits of the SHA-256 of the lock name>_<token>`, one per revoked
 * grant (metadata names must be C# identifiers, and lock names are any text).
 */
export const META_REVOKED_PREFIX = "batonrevoked_";

/**
 * The longest reason a note carries, in characters (code points): a heartbeat's metadata is
 * HTTP headers, 8 KiB in all, and a note is base64 of UTF-8. A longer reason reaches the
 * holder cut to this length.
 */
export const MAX_NOTE_REASON = 512;

/** A forced release's note, as the holder's renewal reads it from its heartbeat. */
export interface RevocationNote {
  /** The lock's name. */
  readonly key: string;
  /** The revoked grant's token. */
  readonly token: bigint;
  /** The operator's reason. */
  readonly reason: string;
}

/** The metadata name of the note revoking grant `token` of lock `key`. */
export function revocationName(key: string, token: bigint): string {
  const hash = createHash("sha256").update(key, "utf8").digest("hex").slice(0, 16);
  return `${META_REVOKED_PREFIX}${hash}_${token}`;
}

/**
 * A note's metadata value: the base64url of `{"k":"<name>","t":"<token>","r":"<reason>"}`
 * (metadata values are ASCII).
 */
export function encodeRevocationNote(note: RevocationNote): string {
  const json = JSON.stringify({
    k: note.key,
    t: note.token.toString(),
    r: Array.from(note.reason).slice(0, MAX_NOTE_REASON).join(""),
  });
  return Buffer.from(json, "utf8").toString("base64url");
}

/**
 * The notes in a heartbeat's metadata (as a HEAD returns it, names in lower case); values
 * that do not decode are skipped (nothing Baton wrote).
 */
export function decodeRevocationNotes(
  metadata: Record<string, string> | undefined,
): RevocationNote[] {
  const notes: RevocationNote[] = [];
  for (const [name, value] of Object.entries(metadata ?? {})) {
    if (!name.startsWith(META_REVOKED_PREFIX)) continue;
    try {
      const parsed = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as {
        k?: unknown;
        t?: unknown;
        r?: unknown;
      };
      if (typeof parsed.k !== "string" || typeof parsed.r !== "string") continue;
      if (typeof parsed.t !== "string" || !/^\d{1,20}$/.test(parsed.t)) continue;
      notes.push({ key: parsed.k, token: BigInt(parsed.t), reason: parsed.r });
    } catch {
      // Not a note Baton wrote.
    }
  }
  return notes;
}

/** A record's body: the UTF-8 bytes of the string core wrote. */
export function encodeRecordValue(value: string): Buffer {
  return Buffer.from(value, "utf8");
}

/** A record's value as read from its body. */
export function decodeRecordValue(body: Buffer): string {
  return body.toString("utf8");
}

/**
 * A record's version: its blob's ETag, as Azure returns it (quotes included). Opaque: compared
 * only for equality, and handed back to Azure in `If-Match`.
 */
export function encodeRecordVersion(etag: string): string {
  return etag;
}

/** The ETag a record version stands for, or `undefined` for a string no ETag can be. */
export function decodeRecordVersion(version: string): string | undefined {
  return /^"?0x[0-9A-F]+"?$/i.test(version) || /^"[^"]+"$/.test(version) ? version : undefined;
}
