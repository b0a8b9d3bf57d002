import {
  type BackendAcquireOptions,
  BackendUnavailableError,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
  linkSignals,
  PollBackoff,
  type RevokedGrant,
  SessionLostError,
  type StoredRecord,
} from "@baton/core";
import type { AzureBlobSession } from "./azure-blob-clients.js";
import { encodeHeartbeat, encodeLockBody, encodeLockMetadata } from "./azure-blob-codec.js";
import { AzureBlobInspection, revokedBy } from "./azure-blob-inspection.js";
import { lockBlobName, sessionBlobName } from "./azure-blob-keys.js";
import { AzureBlobRecords } from "./azure-blob-records.js";
import { type BlobStore, type LockBlobState, MISSING, REFUSED } from "./blob-store.js";
import type { ReleaseWakeups } from "./release-wakeups.js";
import type { SessionLiveness } from "./session-liveness.js";

/**
 * What an Azure Blob grant carries to release exactly itself: the session (its id is the
 * lease id) and the ETag of the lock blob as the grant left it. Lease operations keep a
 * blob's ETag, and only the lease holder can write the blob, so a release guarded by that
 * ETag frees this grant and no later one of the same session.
 */
interface AzureBlobGrantHandle {
  readonly sessionId: string;
  readonly etag: string;
}

/** Everything an {@link AzureBlobLeaseSession} needs from its backend. */
export interface AzureBlobSessionContext {
  /** Bounded by the shorter of the request timeout and the TTL. */
  readonly store: BlobStore;
  readonly prefix: string;
  readonly ownerId: string;
  /** The session id: its heartbeat blob's name, and the lease id of every lock it holds. */
  readonly sessionId: string;
  readonly ttlMs: number;
  readonly pollMaxMs: number;
  readonly liveness: SessionLiveness;
  readonly wakeups: ReleaseWakeups;
  readonly onClose: (session: AzureBlobLeaseSession) => void;
  /** The heartbeat's ETag as created, when known: the first renewal is conditional on it. */
  readonly heartbeatEtag?: string;
}

/** Attempts in a row that lost a race (the blob changed between two requests) before a pause. */
const RACES_BEFORE_PAUSE = 3;
/** Lock blobs whose state after this session's own release is remembered. */
const RELEASED_KEPT = 1_024;
/** The first pause of a wait, ms (25 to 50 ms with jitter); it doubles up to `pollMaxMs`. */
const POLL_MIN_MS = 50;

/** One attempt's outcome: a grant, the state of a lock held by another session, or a lost race. */
type Attempt = Grant | { readonly held: LockBlobState } | "race";

/**
 * One session: a heartbeat blob renewed by one request per interval, whatever the number of
 * locks, and an infinite lease per lock blob held, with the session id as its lease id.
 *
 * A grant is one of two sequences, both conditional on the blob's ETag:
 * - after this session's own release of the lock, nothing else having touched it: an
 *   `Acquire Lease` on that ETag, then a `Put Blob` under the lease raising the counter (2
 *   requests);
 * - otherwise: a HEAD, a `Put Blob` on the ETag read, naming this session and raising the
 *   counter (a claim anyone may overwrite), then an `Acquire Lease` on the claim's ETag (3
 *   requests; 4 when this session released the lock but another took it since: the first
 *   sequence is tried, and refused, before).
 * Either way a leased lock blob always names the session that holds its lease, and the token
 * of a grant is the counter its own conditional write left, one more than the counter it read.
 */
export class AzureBlobLeaseSession implements AzureBlobSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Aborted with a `SessionLostError` when the session learns its heartbeat is gone. */
  readonly lost: AbortSignal;
  /** The session id (heartbeat blob name and lease id). */
  readonly sessionId: string;
  readonly #context: AzureBlobSessionContext;
  readonly #store: BlobStore;
  readonly #records: AzureBlobRecords;
  readonly #heartbeat: string;
  readonly #lostController = new AbortController();
  /** Aborted on loss or close: ends every wait of this session. */
  readonly #ended = new AbortController();
  /** Tokens of the locks held, by name. */
  readonly #held = new Map<string, bigint>();
  /** Locks whose lease may still be this session's after a failure, by name. */
  readonly #leftovers = new Set<string>();
  /** Releases in flight, by lock name: an acquire of the name waits for their outcome. */
  readonly #releasing = new Map<string, Promise<unknown>>();
  /** The lock blob's ETag and counter after this session's own release, by lock name. */
  readonly #released = new Map<string, { readonly etag: string; readonly token: bigint }>();
  #beats = 0;
  /** The heartbeat's ETag after this session's last renewal (undefined: read it first). */
  #heartbeatEtag: string | undefined;
  /** Grants revoked by a forced release, read but not reported yet. */
  #revoked: RevokedGrant[] = [];
  readonly #inspection: AzureBlobInspection;
  #closing: Promise<void> | undefined;

  constructor(context: AzureBlobSessionContext) {
    this.#context = context;
    this.#store = context.store;
    this.ownerId = context.ownerId;
    this.ttlMs = context.ttlMs;
    this.sessionId = context.sessionId;
    this.lost = this.#lostController.signal;
    this.#heartbeat = sessionBlobName(context.prefix, context.sessionId);
    this.#records = new AzureBlobRecords(context.store, context.prefix);
    this.#heartbeatEtag = context.heartbeatEtag;
    this.#inspection = new AzureBlobInspection({
      store: context.store,
      prefix: context.prefix,
      liveness: context.liveness,
      wakeups: context.wakeups,
      ttlMs: context.ttlMs,
      sessionId: context.sessionId,
    });
  }

  /**
   * One request: the heartbeat's metadata rewritten (a new ETag), on condition that its ETag
   * is the one this session's last renewal left. O(1) in the locks held. Refused, the
   * heartbeat was written by someone else (a forced release's note): it is read, its notes
   * reported as revoked grants, and rewritten on the ETag read (3 requests).
   */
  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    this.#beats += 1;
    const timeoutMs = Math.min(
      this.#store.requestTimeoutMs,
      Math.max(500, Math.floor(this.ttlMs / 3)),
    );
    const what = "could not renew the session";
    let ifMatch = this.#heartbeatEtag;
    for (let round = 0; ; round++) {
      if (ifMatch === undefined) {
        const state = await this.#store.headHeartbeat(what, this.#heartbeat, timeoutMs);
        if (state === MISSING) this.#heartbeatGone();
        this.#revoked.push(...revokedBy(state.metadata, this.#held));
        ifMatch = state.etag;
      }
      const beat = await this.#store.beat(
        what,
        this.#heartbeat,
        encodeHeartbeat(this.ttlMs, this.#beats),
        timeoutMs,
        ifMatch,
      );
      if (beat === MISSING) this.#heartbeatGone();
      if (beat !== REFUSED) {
        this.#heartbeatEtag = beat;
        break;
      }
      if (round >= 2) {
        throw new BackendUnavailableError(
          this.#store.context(`${what}: its heartbeat changed under every renewal`),
        );
      }
      ifMatch = undefined;
    }
    this.#retryLeftovers();
    if (this.#revoked.length === 0) return undefined;
    const revoked = this.#revoked;
    this.#revoked = [];
    return { revoked };
  }

  /** A renewal found the heartbeat gone: the session is lost. */
  #heartbeatGone(): never {
    const error = new SessionLostError(
      "the Azure Blob session's heartbeat is gone: it was not renewed within its TTL, and another process declared it dead; its locks are lost",
    );
    this.#markLost(error);
    throw error;
  }

  async acquire(name: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    await this.#settle(name);
    const blob = lockBlobName(this.#context.prefix, name);
    const body = encodeLockBody(this.ownerId, options.value);
    try {
      // The signal is read only when about to wait: a grant at the first look needs none (core
      // releases a grant that arrives after it gave up).
      return options.wait
        ? await this.#wait(name, blob, body, options)
        : await this.#tryOnce(name, blob, body);
    } catch (error) {
      if (error instanceof SessionLostError) this.#markLost(error);
      throw error;
    }
  }

  release(grant: Grant): Promise<boolean> {
    const handle = grant.handle as AzureBlobGrantHandle | undefined;
    // Owner check by session: only this session's lease, at this grant's ETag, is ours.
    if (handle === undefined || handle.sessionId !== this.sessionId) return Promise.resolve(false);
    const name = grant.key;
    this.#held.delete(name);
    const blob = lockBlobName(this.#context.prefix, name);
    const releasing = this.#store
      .releaseLease(`could not release "${name}"`, blob, this.sessionId, handle.etag)
      .then(
        (released) => {
          if (released !== true) return false;
          this.#remember(name, handle.etag, grant.token);
          this.#context.wakeups.wake(name);
          return true;
        },
        (error: unknown) => {
          // The lease may still be ours: released before the next acquire of the name, or
          // after the next keepalive, so it does not outlive a live session.
          if (!this.#ended.signal.aborted) this.#leftovers.add(name);
          throw error;
        },
      )
      .finally(() => {
        if (this.#releasing.get(name) === releasing) this.#releasing.delete(name);
      });
    this.#releasing.set(name, releasing);
    return releasing;
  }

  /** The holder of `name` (see azure-blob-inspection.ts). */
  async holder(name: string): Promise<Holder | null> {
    const found = await this.#inspection.holder(name);
    if (found === null) return null;
    const { heldMs: _, ...holder } = found;
    return holder;
  }

  /** One page of lock or record keys (see azure-blob-inspection.ts). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#assertLive();
    return await this.#inspection.listKeys(options);
  }

  /** The holder of a lock key, or `null` (see azure-blob-inspection.ts). */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#assertLive();
    return await this.#inspection.inspectKey(space, key);
  }

  /** Frees one grant of any session, by token (see azure-blob-inspection.ts). */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return await this.#inspection.forceRelease(space, key, options);
  }

  /** The durable record `key` (see azure-blob-records.ts), or `null`. */
  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#assertLive();
    return await this.#records.read(key);
  }

  /** Writes record `key` if its version is `expected`; the new version, or `null`. */
  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#assertLive();
    return await this.#records.write(key, value, expected);
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#ended.abort(new SessionLostError("the Azure Blob session was closed"));
    this.#context.onClose(this);
    const names = new Set([...this.#held.keys(), ...this.#leftovers]);
    this.#held.clear();
    this.#leftovers.clear();
    await Promise.allSettled(
      [...names].map(async (name) => {
        await this.#releaseAny(name);
        this.#context.wakeups.wake(name);
      }),
    );
    this.#context.liveness.forget(this.sessionId);
    await this.#store.deleteBlob("could not end the session", this.#heartbeat);
  }

  /** A try: nothing is left behind; a held lock is `null` unless its holder is found dead. */
  async #tryOnce(name: string, blob: string, body: Buffer): Promise<Grant | null> {
    for (let round = 0; round < RACES_BEFORE_PAUSE; round++) {
      const attempt = await this.#attempt(name, blob, body, undefined);
      if (attempt === "race") continue;
      if (!("held" in attempt)) return attempt;
      if (!(await this.#breakIfDead(name, blob, attempt.held))) return null;
    }
    return null;
  }

  /**
   * Waits: looks at the lock with a pause between looks that starts at 25 to 50 ms and
   * doubles up to `pollMaxMs` (equal jitter), woken early by a release in this process; the
   * holder's heartbeat is read once per its TTL, and a holder found dead has its lease broken.
   */
  async #wait(
    name: string,
    blob: string,
    body: Buffer,
    options: BackendAcquireOptions,
  ): Promise<Grant> {
    // The pauses start over when a look shows a new holder's token: the lock is being passed
    // around, and the next release may come soon (its holder may even hold off to let waiters
    // in), so look again soon.
    const pauses = new PollBackoff({ minMs: POLL_MIN_MS, maxMs: this.#context.pollMaxMs });
    let races = 0;
    // Read before the first pause: the first look needs no signal.
    let signal: AbortSignal | undefined;
    let linked: ReturnType<typeof linkSignals> | undefined;
    try {
      for (;;) {
        if (linked?.signal.aborted) throw linked.signal.reason;
        let pauseMs: number;
        try {
          const attempt = await this.#attempt(name, blob, body, signal);
          if (attempt === "race") {
            if (++races < RACES_BEFORE_PAUSE) continue;
            races = 0;
            pauseMs = pauses.next();
          } else if ("held" in attempt) {
            races = 0;
            const liveness = await this.#liveness(attempt.held);
            if (!liveness.alive) {
              await this.#store.breakLease(
                `could not break the stale lease of "${name}"`,
                blob,
                attempt.held.etag,
              );
              continue;
            }
            pauseMs = Math.min(pauses.next(attempt.held.meta.token), liveness.recheckInMs + 1);
          } else return attempt;
        } catch (error) {
          if (linked?.signal.aborted) throw linked.signal.reason;
          if (!(error instanceof BackendUnavailableError)) throw error;
          // The store did not answer: keep waiting, look again after a pause.
          pauseMs = pauses.next();
        }
        if (linked === undefined) {
          signal = options.signal;
          linked = linkSignals([signal, this.#ended.signal]);
        }
        await this.#context.wakeups.pause(name, pauseMs, linked.signal);
      }
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw error;
    } finally {
      linked?.dispose();
    }
  }

  /** Whether the session holding `state` lives (always, for a lease no Baton session names). */
  #liveness(state: LockBlobState) {
    if (state.meta.session === "") {
      return Promise.resolve({ alive: true as const, recheckInMs: this.#context.pollMaxMs });
    }
    return this.#context.liveness.check(state.meta.session, this.ttlMs);
  }

  /** Breaks the lease of a lock whose holder is dead: true when the caller may try again. */
  async #breakIfDead(name: string, blob: string, state: LockBlobState): Promise<boolean> {
    const liveness = await this.#liveness(state);
    if (liveness.alive) return false;
    await this.#store.breakLease(`could not break the stale lease of "${name}"`, blob, state.etag);
    return true;
  }

  /** One grant attempt (see the class comment). */
  async #attempt(
    name: string,
    blob: string,
    body: Buffer,
    signal: AbortSignal | undefined,
  ): Promise<Attempt> {
    const what = `could not acquire "${name}"`;
    const released = this.#released.get(name);
    if (released !== undefined) {
      this.#released.delete(name);
      // Hot path: see docs/hot-path.md, "Azure Blob".
      const leased = await this.#lease(name, blob, released.etag);
      if (leased) {
        const token = released.token + 1n;
        let etag: string | typeof REFUSED;
        try {
          etag = await this.#store.putLock(
            what,
            blob,
            body,
            encodeLockMetadata({ token, session: this.sessionId }),
            released.etag,
            this.sessionId,
          );
        } catch (error) {
          await this.#cleanup(name);
          throw error;
        }
        if (etag !== REFUSED) return this.#finish(name, token, etag, signal);
        await this.#cleanup(name);
        return "race";
      }
    }
    const state = await this.#store.headLock(what, blob);
    let token: bigint;
    let claimed: string | typeof REFUSED;
    if (state === MISSING) {
      token = 1n;
      claimed = await this.#store.putLock(
        what,
        blob,
        body,
        encodeLockMetadata({ token, session: this.sessionId }),
        null,
      );
    } else if (state.leased) {
      if (state.meta.session !== this.sessionId) return { held: state };
      // This session's own lease, left by a failure: give it up, then take the lock anew.
      await this.#releaseAny(name);
      return "race";
    } else {
      token = state.meta.token + 1n;
      claimed = await this.#store.putLock(
        what,
        blob,
        body,
        encodeLockMetadata({ token, session: this.sessionId }),
        state.etag,
      );
    }
    if (claimed === REFUSED) return "race";
    if (!(await this.#lease(name, blob, claimed))) return "race";
    return this.#finish(name, token, claimed, signal);
  }

  /** Acquires this session's lease on `blob` at `etag`; a failure leaves nothing behind. */
  async #lease(name: string, blob: string, etag: string): Promise<boolean> {
    try {
      const leased = await this.#store.acquireLease(
        `could not acquire "${name}"`,
        blob,
        this.sessionId,
        etag,
        (late) => {
          void late.then(
            (granted) => (granted === true ? this.#cleanup(name) : undefined),
            () => undefined,
          );
        },
      );
      return leased === true;
    } catch (error) {
      // The answer was lost, not necessarily the request: the lease may be ours.
      await this.#cleanup(name);
      throw error;
    }
  }

  /** Hands out the grant, unless the caller gave up meanwhile (then the lease is released). */
  async #finish(
    name: string,
    token: bigint,
    etag: string,
    signal: AbortSignal | undefined,
  ): Promise<Grant> {
    if (signal?.aborted) {
      await this.#cleanup(name);
      throw signal.reason;
    }
    if (this.#ended.signal.aborted) {
      await this.#cleanup(name);
      this.#assertLive();
    }
    this.#held.set(name, token);
    const handle: AzureBlobGrantHandle = { sessionId: this.sessionId, etag };
    return { key: name, ownerId: this.ownerId, token, handle };
  }

  /** Releases this session's lease on `name` if it has it; remembered as a leftover on failure. */
  async #cleanup(name: string): Promise<void> {
    try {
      await this.#releaseAny(name);
    } catch {
      if (!this.#ended.signal.aborted) this.#leftovers.add(name);
    }
  }

  /** Releases this session's lease on lock `name`, whatever the blob's ETag. */
  async #releaseAny(name: string): Promise<void> {
    await this.#store.releaseLease(
      `could not release "${name}"`,
      lockBlobName(this.#context.prefix, name),
      this.sessionId,
    );
    this.#leftovers.delete(name);
  }

  /** Before an acquire of `name`: a release in flight settles, a leftover lease is released. */
  async #settle(name: string): Promise<void> {
    const releasing = this.#releasing.get(name);
    if (releasing !== undefined) await releasing.catch(() => undefined);
    if (this.#leftovers.has(name)) await this.#releaseAny(name);
  }

  #retryLeftovers(): void {
    for (const name of this.#leftovers) {
      if (this.#releasing.has(name)) continue;
      const run = this.#releaseAny(name)
        .catch(() => undefined)
        .finally(() => {
          if (this.#releasing.get(name) === run) this.#releasing.delete(name);
        });
      this.#releasing.set(name, run);
    }
  }

  #remember(name: string, etag: string, token: bigint): void {
    this.#released.set(name, { etag, token });
    if (this.#released.size > RELEASED_KEPT) {
      const oldest = this.#released.keys().next().value;
      if (oldest !== undefined) this.#released.delete(oldest);
    }
  }

  #assertLive(): void {
    const reason: unknown = this.#ended.signal.reason;
    if (this.#ended.signal.aborted) {
      throw reason instanceof SessionLostError
        ? reason
        : new SessionLostError("the Azure Blob session ended");
    }
  }

  #markLost(error: SessionLostError): void {
    if (!this.#ended.signal.aborted) this.#ended.abort(error);
    if (!this.#lostController.signal.aborted) this.#lostController.abort(error);
  }
}
