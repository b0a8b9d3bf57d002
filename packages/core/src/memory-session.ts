import type {
  BackendAcquireOptions,
  BackendSession,
  Grant,
  Holder,
  KeepAliveResult,
  StoredRecord,
} from "./backend.js";
import { SessionLostError } from "./errors.js";
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
    return undefined;
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
    return this.#store.release(this.#state, grant.key, grant.token);
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

  watch(key: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    return this.#store.watch(key, signal);
  }

  async close(): Promise<void> {
    this.#store.closeSession(this.#state);
    this.#onClose(this);
  }

  #assertLive(): void {
    if (this.#state.closed) throw new SessionLostError("memory session is closed");
  }
}
