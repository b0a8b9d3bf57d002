import { systemClock } from "@baton/core";
import { decodeHeartbeatTtl } from "./azure-blob-codec.js";
import { sessionBlobName } from "./azure-blob-keys.js";
import { type BlobStore, MISSING, REFUSED } from "./blob-store.js";

/** What a look at a holding session's heartbeat found. */
export type Liveness =
  | { readonly alive: true; readonly recheckInMs: number }
  | { readonly alive: false };

const DEAD: Liveness = { alive: false };

/** What this process last saw of a session's heartbeat, on its own monotonic clock. */
type Seen =
  | { readonly dead: false; readonly etag: string; readonly seenAt: number; readonly ttlMs: number }
  | { readonly dead: true; readonly seenAt: number };

/** Entries kept before old ones are dropped. */
const PRUNE_ABOVE = 512;
/** A dead session is remembered this long (its locks may still be leased by it). */
const DEAD_KEPT_MS = 10 * 60_000;

/**
 * Decides, for one backend, whether the session named in a lock blob is dead, by its heartbeat
 * alone and on this process's monotonic clock: never by comparing clocks.
 *
 * A heartbeat seen with the same ETag a whole TTL (the holder's own, from the heartbeat's
 * metadata) after this process first saw that ETag belongs to a session whose local deadline
 * has passed: the renewal that wrote that ETag started before the first look returned, and
 * the holder trusts its locks for at most a TTL from the start of its last confirmed renewal.
 * The session is then declared dead by deleting its heartbeat with `If-Match` on that ETag:
 * a renewal that lands first changes the ETag and the delete is refused; a renewal after the
 * delete finds no heartbeat, and the holder learns its session is lost. Only then may a
 * waiter break the dead session's lease.
 */
export class SessionLiveness {
  readonly #store: BlobStore;
  readonly #prefix: string;
  readonly #seen = new Map<string, Seen>();
  readonly #checking = new Map<string, Promise<Liveness>>();

  constructor(store: BlobStore, prefix: string) {
    this.#store = store;
    this.#prefix = prefix;
  }

  /**
   * Whether session `sessionId` lives: alive (look again after `recheckInMs`), or dead (its
   * heartbeat is gone, or this call removed it). `fallbackTtlMs` stands in for a heartbeat
   * that declares no TTL.
   */
  check(sessionId: string, fallbackTtlMs: number): Promise<Liveness> {
    const now = systemClock.now();
    const seen = this.#seen.get(sessionId);
    if (seen?.dead === true) return Promise.resolve(DEAD);
    if (seen !== undefined && now - seen.seenAt < seen.ttlMs) {
      return Promise.resolve({ alive: true, recheckInMs: seen.seenAt + seen.ttlMs - now });
    }
    let checking = this.#checking.get(sessionId);
    if (checking === undefined) {
      checking = this.#look(sessionId, fallbackTtlMs).finally(() => {
        this.#checking.delete(sessionId);
      });
      this.#checking.set(sessionId, checking);
    }
    return checking;
  }

  /** Records that `sessionId` ended (this process closed it). */
  forget(sessionId: string): void {
    this.#seen.set(sessionId, { dead: true, seenAt: systemClock.now() });
  }

  async #look(sessionId: string, fallbackTtlMs: number): Promise<Liveness> {
    const name = sessionBlobName(this.#prefix, sessionId);
    const what = "could not read a holder's heartbeat";
    const heartbeat = await this.#store.headHeartbeat(what, name);
    const now = systemClock.now();
    if (heartbeat === MISSING) return this.#dead(sessionId, now);
    const seen = this.#seen.get(sessionId);
    const ttlMs = decodeHeartbeatTtl(heartbeat.metadata, fallbackTtlMs);
    if (seen === undefined || seen.dead || seen.etag !== heartbeat.etag) {
      this.#remember(sessionId, { dead: false, etag: heartbeat.etag, seenAt: now, ttlMs });
      return { alive: true, recheckInMs: ttlMs };
    }
    // The same heartbeat a whole TTL after it was first seen: the holder's deadline passed.
    const removed = await this.#store.deleteBlob(
      "could not remove a stale holder's heartbeat",
      name,
      heartbeat.etag,
    );
    if (removed === REFUSED) {
      // A renewal landed just now: the session lives; its new heartbeat is read next time.
      this.#seen.delete(sessionId);
      return { alive: true, recheckInMs: 0 };
    }
    return this.#dead(sessionId, systemClock.now());
  }

  #dead(sessionId: string, now: number): Liveness {
    this.#remember(sessionId, { dead: true, seenAt: now });
    return DEAD;
  }

  #remember(sessionId: string, seen: Seen): void {
    this.#seen.set(sessionId, seen);
    if (this.#seen.size <= PRUNE_ABOVE) return;
    for (const [id, entry] of this.#seen) {
      const age = seen.seenAt - entry.seenAt;
      if (entry.dead ? age > DEAD_KEPT_MS : age > 2 * entry.ttlMs) this.#seen.delete(id);
    }
  }
}
