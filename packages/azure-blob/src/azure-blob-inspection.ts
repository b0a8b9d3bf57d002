import {
  BackendUnavailableError,
  type ForceReleaseOptions,
  type InspectedHolder,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
  type RevokedGrant,
} from "@baton/core";
import {
  decodeHeartbeatTtl,
  decodeHolder,
  decodeRevocationNotes,
  encodeRevocationNote,
  revocationName,
} from "./azure-blob-codec.js";
import {
  escapePrefix,
  LOCKS_FOLDER,
  lockBlobName,
  RECORDS_FOLDER,
  sessionBlobName,
  unescapeName,
} from "./azure-blob-keys.js";
import { type BlobStore, MISSING, REFUSED } from "./blob-store.js";
import type { ReleaseWakeups } from "./release-wakeups.js";
import type { SessionLiveness } from "./session-liveness.js";

/** The resolution of the HTTP dates Azure's ages come from (`Date`, `Last-Modified`). */
const HTTP_DATE_RESOLUTION_MS = 1_000;

/** Tries at writing a note on a heartbeat that its holder's renewals keep changing. */
const NOTE_TRIES = 5;

/** What inspection needs from a session of the backend. */
export interface AzureBlobInspectionContext {
  readonly store: BlobStore;
  readonly prefix: string;
  readonly liveness: SessionLiveness;
  readonly wakeups: ReleaseWakeups;
  /** The TTL that stands for a heartbeat declaring none. */
  readonly ttlMs: number;
  /** The inspecting session's id: its own locks need no look at a heartbeat. */
  readonly sessionId: string;
}

/**
 * Inspection and forced release for operators, on the blob layout of azure-blob-keys.ts.
 *
 * - Listing is one `List Blobs` request per page under the lock or record folder (with
 *   `maxresults` and Azure's continuation marker as the cursor); a lock is listed while its
 *   blob is leased.
 * - A holder is read as `holder()` reads it: one GET of the lock blob, and the holding
 *   session's heartbeat at most once per TTL (see session-liveness.ts); a holder found dead is
 *   no holder. Waiters write nothing, so Azure cannot tell who waits.
 * - A forced release first writes a note (the grant's token and the reason) into the holding
 *   session's heartbeat metadata, with `If-Match` on the heartbeat's ETag, then releases the
 *   holder's lease (its id is the session id the lock blob names) with `If-Match` on the lock
 *   blob's ETag, which no lease operation changes and every grant does: a later grant is
 *   never released. The blob stays, so its counter does, and the next grant's token is
 *   greater. The holder's renewal is conditional on its heartbeat's ETag: the note makes it
 *   fail, and the holder then reads the heartbeat, finds the note and renews again.
 */
export class AzureBlobInspection {
  readonly #context: AzureBlobInspectionContext;

  constructor(context: AzureBlobInspectionContext) {
    this.#context = context;
  }

  /** One page of leased lock keys or record keys; no permit keys (no semaphores). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    const { space, prefix, cursor, limit, signal } = options;
    if (space === "permit") return { keys: [] };
    if (signal.aborted) throw signal.reason;
    const folder = `${this.#context.prefix}${space === "lock" ? LOCKS_FOLDER : RECORDS_FOLDER}`;
    const page = await this.#context.store.listBlobs(
      `could not list the ${space} keys`,
      folder + escapePrefix(prefix),
      limit,
      cursor,
    );
    if (signal.aborted) throw signal.reason;
    const keys: string[] = [];
    for (const blob of page.blobs) {
      if (space === "lock" && !blob.leased) continue;
      const key = unescapeName(blob.name.slice(folder.length));
      if (key?.startsWith(prefix)) keys.push(key);
    }
    return page.cursor === undefined ? { keys } : { keys, cursor: page.cursor };
  }

  /**
   * The holder of lock `key` (waiters are not known to Azure); permit keys: none. Besides
   * what `holder()` judges, the holder's heartbeat is read (a HEAD): one not written for more
   * than its TTL by Azure's clock (plus a second: the clock's resolution) counts as expired,
   * as a process that never saw it renew could not tell otherwise, and `remainingMs` is the
   * shorter of this process's view and Azure's (0 when overdue).
   */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    if (space === "permit") return null;
    const read = await this.#read(key);
    if (read === null) return null;
    const { holder, session } = read;
    if (session === this.#context.sessionId || session === "") return { holders: [holder] };
    const heartbeat = await this.#context.store.headHeartbeat(
      `could not read the holder of "${key}"`,
      sessionBlobName(this.#context.prefix, session),
    );
    if (heartbeat === MISSING) return null;
    if (heartbeat.sinceWriteMs === undefined) return { holders: [holder] };
    const ttlMs = decodeHeartbeatTtl(heartbeat.metadata, this.#context.ttlMs);
    const leftMs = ttlMs - heartbeat.sinceWriteMs;
    if (leftMs < -HTTP_DATE_RESOLUTION_MS) return null;
    const remainingMs = Math.max(0, Math.min(holder.remainingMs ?? leftMs, leftMs));
    return { holders: [{ ...holder, remainingMs }] };
  }

  /**
   * The holder of `name`: one GET of the lock blob, and a look at the holding session's
   * heartbeat at most once per TTL. A lock whose holder this process finds dead is free.
   * `heldMs` is the age of the grant's write to the blob, by Azure's clock (whole seconds).
   */
  async holder(name: string): Promise<InspectedHolder | null> {
    return (await this.#read(name))?.holder ?? null;
  }

  async #read(
    name: string,
  ): Promise<{ readonly holder: InspectedHolder; readonly session: string } | null> {
    const blob = lockBlobName(this.#context.prefix, name);
    const store = this.#context.store;
    const lock = await store.getLock(`could not read the holder of "${name}"`, blob);
    if (lock === MISSING || !lock.leased) return null;
    const found = decodeHolder(lock.body, lock.meta);
    if (found === null) return null;
    const held = lock.sinceWriteMs === undefined ? found : { ...found, heldMs: lock.sinceWriteMs };
    const session = lock.meta.session;
    if (session === this.#context.sessionId || session === "") return { holder: held, session };
    const liveness = await this.#context.liveness.check(session, this.#context.ttlMs);
    if (!liveness.alive) return null;
    // Time left unless renewed, as this process sees it: from its first sight of the holder's
    // heartbeat (0: a renewal just landed, and its time is not known yet).
    const holder =
      liveness.recheckInMs > 0 ? { ...held, remainingMs: Math.round(liveness.recheckInMs) } : held;
    return { holder, session };
  }

  /**
   * Frees grant `token` of lock `key`, whoever holds it (see the class): `false` when that
   * grant is not held (released, a later grant, or its session gone: a lease left by a gone
   * session is broken all the same).
   */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    if (space === "permit") return false;
    const { token, reason, signal } = options;
    const store = this.#context.store;
    const what = `could not force-release "${key}"`;
    const blob = lockBlobName(this.#context.prefix, key);
    if (signal.aborted) throw signal.reason;
    const lock = await store.headLock(what, blob);
    if (lock === MISSING || !lock.leased || lock.meta.token !== token) return false;
    const session = lock.meta.session;
    if (session === "") return false;
    if (signal.aborted) throw signal.reason;
    if (!(await this.#note(session, { key, token, reason }, what))) {
      // The holder's session is gone: its lease is left over, free it for the next acquirer.
      await store.breakLease(what, blob, lock.etag);
      this.#context.wakeups.wake(key);
      return false;
    }
    if (signal.aborted) throw signal.reason;
    const released = await store.releaseLease(what, blob, session, lock.etag);
    if (released !== true) return false;
    this.#context.wakeups.wake(key);
    return true;
  }

  /**
   * Adds a revocation note to session `session`'s heartbeat, keeping its metadata: true, or
   * false when the heartbeat is gone.
   */
  async #note(
    session: string,
    note: { readonly key: string; readonly token: bigint; readonly reason: string },
    what: string,
  ): Promise<boolean> {
    const store = this.#context.store;
    const heartbeat = sessionBlobName(this.#context.prefix, session);
    for (let attempt = 0; attempt < NOTE_TRIES; attempt++) {
      const state = await store.headHeartbeat(what, heartbeat);
      if (state === MISSING) return false;
      const metadata = {
        ...state.metadata,
        [revocationName(note.key, note.token)]: encodeRevocationNote(note),
      };
      const written = await store.beat(
        what,
        heartbeat,
        metadata,
        store.requestTimeoutMs,
        state.etag,
      );
      if (written === MISSING) return false;
      if (written !== REFUSED) return true;
    }
    throw new BackendUnavailableError(
      store.context(`${what}: the holder's heartbeat changed under every attempt to write to it`),
    );
  }
}

/**
 * The grants of `held` (lock name to token) that the notes in a heartbeat's metadata revoke,
 * each taken out of `held` (so it is reported once).
 */
export function revokedBy(
  metadata: Record<string, string>,
  held: Map<string, bigint>,
): RevokedGrant[] {
  const revoked: RevokedGrant[] = [];
  for (const note of decodeRevocationNotes(metadata)) {
    if (held.get(note.key) !== note.token) continue;
    held.delete(note.key);
    revoked.push({ space: "lock", key: note.key, token: note.token, reason: note.reason });
  }
  return revoked;
}
