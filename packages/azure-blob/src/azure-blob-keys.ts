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
