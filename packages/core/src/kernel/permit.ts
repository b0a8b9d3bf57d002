import type { PermitMode } from "../contract/backend.js";
import { ConfigError } from "../contract/errors.js";
import { Lock, type LockInit } from "./lock.js";

/** @internal What a permit asks the backend for: the key's limit, its share, its token rule. */
export interface PermitRequest {
  readonly limit: number;
  readonly permits: number;
  readonly mode: PermitMode;
}

/** @internal What the coordinator gives a {@link Permit} besides a lock's init. */
export interface PermitInit extends LockInit {
  /** Turns a held write into a read with the same token (see {@link Permit.downgrade}). */
  downgrade(): Promise<Permit>;
}

/**
 * Held permits of a semaphore, or a read or write hold of a read-write lock. A `Permit` is a
 * {@link Lock} in every way (token, signal, `held`, `extend`, `release()`, `await using`):
 * leased from the coordinator's session, renewed with everything else on it, freed within a
 * TTL when its process dies.
 *
 * Tokens: a semaphore's permits and a write take a token strictly greater than every earlier
 * one of the name (per the backend's fencing); a read carries the token of the newest write
 * before it, so concurrent reads share one and a fence that has seen a write accepts the
 * reads that follow it.
 *
 * @example
 * const exports = coordinator.semaphore("exports", { permits: 3 });
 * await using permit = await exports.acquire();
 * await runExport({ token: permit.token, signal: permit.signal });
 */
export class Permit extends Lock {
  /** How many of the semaphore's permits this holds (1 for a read, all of them for a write). */
  readonly permits: number;
  /** `"permit"` (a semaphore's), `"read"` or `"write"` (a read-write lock's). */
  readonly mode: PermitMode;
  readonly #init: PermitInit;

  /** @internal Built by the coordinator. */
  constructor(init: PermitInit, permits: number, mode: PermitMode) {
    super(init);
    this.permits = permits;
    this.mode = mode;
    this.#init = init;
  }

  /**
   * Turns this write lock into a read lock with the same token, in one step at the store: no
   * other writer gets in between, and readers waiting behind it may start at once. Resolves
   * the read lock; this write lock ends (its signal aborts with reason `released`, before the
   * store is asked, so writes under it stop first). Rejects with a `ConfigError` on a permit
   * that is not a write, with the `LockLostError` when the write was already lost, and with
   * `BackendUnavailableError` when the store did not answer (the write is then released).
   *
   * @example
   * const write = await catalog.write();
   * await rebuildIndex({ token: write.token });
   * await using read = await write.downgrade(); // readers may join; no writer can slip in
   * await publishIndex({ token: read.token });
   */
  downgrade(): Promise<Permit> {
    if (this.mode !== "write") {
      return Promise.reject(
        new ConfigError("downgrade", `only a write lock can be downgraded; this is a ${this.mode}`),
      );
    }
    return this.#init.downgrade();
  }
}
