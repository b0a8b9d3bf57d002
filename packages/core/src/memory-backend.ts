import type {
  BackendAcquireOptions,
  BackendSession,
  Grant,
  Holder,
  KeepAliveResult,
  LockBackend,
  OpenSessionOptions,
} from "./backend.js";
import type { Clock } from "./clock.js";
import { BackendUnavailableError, SessionLostError } from "./errors.js";
import type { Guarantees } from "./guarantees.js";
import { type MemorySessionState, MemoryStore } from "./memory-store.js";

/** Options of {@link MemoryBackend}. */
export interface MemoryBackendOptions {
  /** Share locks with other backends built on this store (default: a new private store). */
  readonly store?: MemoryStore;
  /** Clock of a new private store, e.g. a `ManualClock` in tests. Ignored when `store` is given. */
  readonly clock?: Clock;
}

export const MEMORY_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: true,
  consensus: false,
  crossProcess: false,
};

/**
 * An in-process backend (`memory://`): real leases, FIFO waiting and rising tokens, but only
 * between coordinators of one process. For tests, demos and single-process apps.
 */
export class MemoryBackend implements LockBackend {
  readonly kind = "memory";
  readonly guarantees = MEMORY_GUARANTEES;
  /** The store this backend's sessions live in. */
  readonly store: MemoryStore;
  readonly #sessions = new Set<MemorySession>();
  #closed = false;

  constructor(options?: MemoryBackendOptions) {
    this.store = options?.store ?? new MemoryStore({ clock: options?.clock });
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this memory backend is closed");
    if (options.signal?.aborted) throw options.signal.reason;
    const session = new MemorySession(this.store, options.ownerId, options.ttlMs, (s) =>
      this.#sessions.delete(s),
    );
    this.#sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#sessions].map((s) => s.close()));
  }
}

class MemorySession implements BackendSession {
  readonly ownerId: string;
  readonly ttlMs: number;
  readonly #store: MemoryStore;
  readonly #state: MemorySessionState;
  readonly #onClose: (s: MemorySession) => void;

  constructor(
    store: MemoryStore,
    ownerId: string,
    ttlMs: number,
    onClose: (s: MemorySession) => void,
  ) {
    this.#store = store;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.#state = store.openSession(ownerId, ttlMs);
    this.#onClose = onClose;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    if (this.#state.closed) throw new SessionLostError("memory session is closed");
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

  watch(key: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    return this.#store.watch(key, signal);
  }

  async close(): Promise<void> {
    this.#store.closeSession(this.#state);
    this.#onClose(this);
  }
}
