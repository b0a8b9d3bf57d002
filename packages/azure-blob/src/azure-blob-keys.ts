/**
 * The blob layout of the Azure Blob adapter, every name it writes in the container:
 *
 * - `<prefix>locks/<name>`: one block blob per lock. Its lease is the lock; its metadata
 *   names the holding session and carries the fencing counter; its body the holder's owner
 *   id and published value.
 * - `<prefix>sessions/<session id>`: one empty blob per session, its heartbeat. Every
 *   renewal rewrites its metadata (a new ETag); a session whose heartbeat is gone is dead.
 * - `<prefix>records/<key>`: one blob per durable record (what `coordinator.runOnce` keeps),
 *   never leased, never expiring.
 *
 * Names are escaped (see {@link escapeName}) so that every lock name, however spelled, is one
 * blob of its own and never another kind of blob.
 */

/** The folder of lock blobs, after the prefix. */
export const LOCKS_FOLDER = "locks/";
/** The folder of session heartbeat blobs, after the prefix. */
export const SESSIONS_FOLDER = "sessions/";
/** The folder of record blobs, after the prefix. */
export const RECORDS_FOLDER = "records/";

/**
 * A lock name or record key as one path segment of a blob name: letters, digits, `-` and `_`
 * as they are, every other UTF-16 code point as the `%XX` escapes of its UTF-8 bytes (so `/`
 * is `%2F` and no name makes a folder, `.` is `%2E` and no name ends with a dot). Azure
 * compares blob names byte for byte, and so do these: two names that differ in any character
 * are two blobs.
 */
export function escapeName(name: string): string {
  return encodeURIComponent(name).replace(
    /[!'()*.~]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/**
 * The lock name or record key a blob name's last segment stands for (the inverse of
 * {@link escapeName}), or `undefined` for a segment Baton did not write.
 */
export function unescapeName(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/**
 * The escape of a name's beginning, as the start of a listing prefix: every name that starts
 * with `prefix` has a blob name that starts with it. A lone high surrogate at the end (half
 * of a character) is left out.
 */
export function escapePrefix(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  const whole = last >= 0xd800 && last <= 0xdbff ? prefix.slice(0, -1) : prefix;
  try {
    return escapeName(whole);
  } catch {
    return "";
  }
}

/** The blob of lock `name`. */
export function lockBlobName(prefix: string, name: string): string {
  return `${prefix}${LOCKS_FOLDER}${escapeName(name)}`;
}

/** The heartbeat blob of session `sessionId`. */
export function sessionBlobName(prefix: string, sessionId: string): string {
  return `${prefix}${SESSIONS_FOLDER}${sessionId}`;
}

/** The blob of record `key`. */
export function recordBlobName(prefix: string, key: string): string {
  return `${prefix}${RECORDS_FOLDER}${escapeName(key)}`;
}
