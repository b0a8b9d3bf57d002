import type { BackendSession, LockBackend, OpenSessionOptions } from "../contract/backend.js";
import { BackendUnavailableError } from "../contract/errors.js";
import type { Guarantees } from "../contract/guarantees.js";
import { checkMemoryOptions, type MemoryBackendOptions } from "./memory-options.js";
import { MemorySession } from "./memory-session.js";
import { MemoryStore, namedStore } from "./memory-store.js";

/**
 * What the memory backend guarantees: tokens from one in-process counter (they rise across
 * all keys and never go back while the process lives), FIFO waiting, and locks that exclude
 * only coordinators of this process. Every key can be listed and inspected, and one grant
 * force-released (its holder's other locks live on).
 */
export const MEMORY_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: true,
  consensus: false,
  crossProcess: false,
  records: true,
  semaphores: true,
  inspection: true,
  forceRelease: "grant",
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

  /** Throws `ConfigError` naming the field for options it does not understand. */
  constructor(options?: MemoryBackendOptions) {
    checkMemoryOptions(options);
    this.store =
      options?.store ??
      (options?.storeName === undefined
        ? new MemoryStore({ clock: options?.clock })
        : namedStore(options.storeName));
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this memory backend is closed");
    if (options.signal?.aborted) throw options.signal.reason;
    const session = new MemorySession({
      store: this.store,
      ownerId: options.ownerId,
      ttlMs: options.ttlMs,
      onClose: (s) => this.#sessions.delete(s),
    });
    this.#sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#sessions].map((s) => s.close()));
  }
}
