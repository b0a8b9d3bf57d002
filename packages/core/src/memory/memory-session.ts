import type {
  BackendAcquireOptions,
  BackendPermitOptions,
  BackendSession,
  ForceReleaseOptions,
  Grant,
  Holder,
  KeepAliveResult,
  KeyPage,
  KeyState,
  ListKeysOptions,
  PermitHolder,
  StoredRecord,
} from "../contract/backend.js";
import { SessionLostError } from "../contract/errors.js";
import { MemoryInspection } from "./memory-inspection.js";
import type { PermitEntry } from "./memory-permits.js";
import type { MemorySessionState, MemoryStore } from "./memory-store.js";

/** Everything a {@link MemorySession} needs from its backend. */
export interface MemorySessionContext {
  /** The store the session's lease and locks live in. */
  readonly store: MemoryStore;
  readonly ownerId: string;
  readonly ttlMs: number;
  /** Called once the session has closed, so the backend stops tracking it. */
  readonly onClose: (session: MemorySession) => void;
}

/**
 * One lease in a {@link MemoryStore}. A grant carries no backend data: the store checks a
 * release by session and token.
 */
export class MemorySession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly #store: MemoryStore;
  readonly #state: MemorySessionState;
  readonly #onClose: (session: MemorySession) => void;

  constructor(context: MemorySessionContext) {
    this.#store = context.store;
    this.ownerId = context.ownerId;
    this.ttlMs = context.ttlMs;
    this.#state = context.store.openSession(context.ownerId, context.ttlMs);
    this.#onClose = context.onClose;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    this.#store.keepAlive(this.#state);
    const revoked = this.#state.revoked;
    if (revoked === undefined) return undefined;
    this.#state.revoked = undefined;
    return { revoked };
  }

  async acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null> {
    const got = await this.#store.acquire(
      this.#state,
      key,
      options.wait,
      options.value,
      options, // its signal is read only if the call waits
    );
    return got === null ? null : { key, ownerId: this.ownerId, token: got.token };
  }

  async release(grant: Grant): Promise<boolean> {
    const entry = grant.handle as PermitEntry | undefined;
    if (entry !== undefined) return this.#store.permits.release(this.#state, grant.key, entry);
    return this.#store.release(this.#state, grant.key, grant.token);
  }

  async acquirePermits(key: string, options: BackendPermitOptions): Promise<Grant | null> {
    this.#assertAlive();
    const entry = await this.#store.permits.acquire(
      this.#state,
      key,
      options,
      options.value,
      options, // its signal is read only if the call waits
    );
    return entry === null
      ? null
      : { key, ownerId: this.ownerId, token: entry.token, handle: entry };
  }

  async permitHolders(key: string): Promise<PermitHolder[]> {
    return this.#store.permits.holders(key);
  }

  async downgrade(grant: Grant): Promise<Grant | null> {
    const entry = this.#store.permits.downgrade(
      this.#state,
      grant.key,
      grant.handle as PermitEntry,
    );
    return entry === null
      ? null
      : { key: grant.key, ownerId: this.ownerId, token: entry.token, handle: entry };
  }

  async holder(key: string): Promise<Holder | null> {
    return this.#store.holder(key);
  }

  async readRecord(key: string): Promise<StoredRecord | null> {
    return this.#store.readRecord(key);
  }

  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#assertLive();
    return this.#store.writeRecord(key, value, expected);
  }

  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    return new MemoryInspection(this.#store).listKeys(options);
  }

  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    return new MemoryInspection(this.#store).inspectKey(space, key);
  }

  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return new MemoryInspection(this.#store).forceRelease(space, key, options);
  }

  watch(key: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    return this.#store.watch(key, signal);
  }

  async close(): Promise<void> {
    this.#store.closeSession(this.#state);
    this.#onClose(this);
  }

  /** Like the store's lock acquire: a session whose lease ran out is closed and refused. */
  #assertAlive(): void {
    this.#assertLive();
    if (this.#store.clock.now() >= this.#state.expiresAt) {
      this.#store.closeSession(this.#state);
      throw new SessionLostError(`memory session of "${this.ownerId}" expired`);
    }
  }

  #assertLive(): void {
    if (this.#state.closed) throw new SessionLostError("memory session is closed");
  }
}
