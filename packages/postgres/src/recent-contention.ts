import { systemClock } from "@baton/core";

/** Keys remembered at most (beyond, the memory starts again). */
const MAX_KEYS = 1_024;

/**
 * The keys a session lately found held when it tried them, so that its next waiting acquire
 * of such a key waits in the server at once instead of trying first: while a lock changes
 * hands among waiters, the try before the wait is one more statement (a round trip, and its
 * work on both sides) that is nearly always refused. A key counts as contended for `forMs`
 * after a refused try; past that the session tries first again, the cheaper statement when
 * the lock is free. Either way the grant is the same: the wait returns at once on a free lock.
 */
export class RecentContention {
  readonly #seenAt = new Map<bigint, number>();
  readonly #forMs: number;

  constructor(forMs: number) {
    this.#forMs = forMs;
  }

  /** A try of `key` was refused: another connection held it. */
  seen(key: bigint): void {
    if (this.#seenAt.size >= MAX_KEYS && !this.#seenAt.has(key)) this.#seenAt.clear();
    this.#seenAt.set(key, systemClock.now());
  }

  /** Whether a try of `key` was refused within the last `forMs`. */
  recent(key: bigint): boolean {
    if (this.#seenAt.size === 0) return false;
    const at = this.#seenAt.get(key);
    if (at === undefined) return false;
    if (systemClock.now() - at < this.#forMs) return true;
    this.#seenAt.delete(key);
    return false;
  }
}
