import type { SessionState } from "./dynamodb-codec.js";

/** How many sessions of other clients one backend keeps in mind at most. */
const MAX_OBSERVED = 10_000;

/** One sighting of another client's session: its renewal counter and when it was first seen. */
interface Sighting {
  readonly beat: string;
  /** Monotonic time (this process's clock) of the reply that first showed this counter. */
  readonly seenAt: number;
  readonly ttlMs: number;
}

/**
 * Decides, on this process's monotonic clock alone, when another client's session has
 * expired: when its renewal counter has not changed for a whole TTL of that session since
 * this process first saw it. No clock is compared across machines: the holder's own deadline
 * (from before the renewal that wrote the counter, plus its TTL, less core's drift allowance)
 * ends before this one, as long as the two clocks run at about the same rate.
 *
 * Sightings are shared by every session of one backend, so a waiter, a try and `holder()`
 * count from the first time any of them saw the counter.
 */
export class ExpiryObserver {
  readonly #seen = new Map<string, Sighting>();
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /**
   * Records what a read just answered (`readAt`: when its reply arrived) and returns when the
   * session expires if its counter stays as it is: a monotonic time, at or before now when it
   * has expired already.
   */
  observe(sessionId: string, state: SessionState, readAt = this.#now()): number {
    const known = this.#seen.get(sessionId);
    if (known !== undefined && known.beat === state.beat && known.ttlMs === state.ttlMs) {
      return known.seenAt + known.ttlMs;
    }
    if (known !== undefined) this.#seen.delete(sessionId);
    else if (this.#seen.size >= MAX_OBSERVED) {
      const oldest = this.#seen.keys().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    this.#seen.set(sessionId, { beat: state.beat, seenAt: readAt, ttlMs: state.ttlMs });
    return readAt + state.ttlMs;
  }

  /** Forgets a session (it is gone, or this client ended it). */
  forget(sessionId: string): void {
    this.#seen.delete(sessionId);
  }

  /** Monotonic now, on the clock sightings use. */
  now(): number {
    return this.#now();
  }
}
