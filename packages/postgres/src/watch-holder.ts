import { type Holder, linkSignals, sleep, systemClock } from "@baton/core";
import type { WaiterPool } from "./waiter-pool.js";

/** What {@link watchHolder} needs of a session. */
export interface WatchedLock {
  /** The lock's advisory key. */
  readonly key: bigint;
  /** Reads the lock's holder now. */
  readonly read: () => Promise<Holder | null>;
  /** The session's TTL: the watch looks again at least every third of it (at most 1 s). */
  readonly ttlMs: number;
  /** Aborted when the session is lost: the watch then fails with its reason. */
  readonly lost: AbortSignal;
  readonly waiters: WaiterPool;
}

/** How often a watch looks again at a lock that may have changed hands unseen. */
export function watchPollMs(ttlMs: number): number {
  return Math.min(1_000, Math.max(20, Math.floor(ttlMs / 3)));
}

/**
 * Yields the holder of `lock` now and after every change until `signal` aborts. A release,
 * or the end of the holder's connection, is seen at once (a server-side wait on a waiter
 * connection); a new grant on a free lock, or a handoff to a waiting session, within
 * {@link watchPollMs} (polled).
 */
export async function* watchHolder(
  lock: WatchedLock,
  signal: AbortSignal,
): AsyncGenerator<Holder | null> {
  const pollMs = watchPollMs(lock.ttlMs);
  let last: string | undefined;
  while (!signal.aborted) {
    const holder = await lock.read();
    const id = holder === null ? "" : `${holder.ownerId}\u0000${holder.token}`;
    if (id !== last) {
      last = id;
      yield holder;
      if (signal.aborted) return;
    }
    // linkSignals, not AbortSignal.any: on Node 20 every AbortSignal.any on the long-lived
    // lost signal stays registered with it.
    const waiting = linkSignals([signal, lock.lost]);
    try {
      // Bounded: a lock handed straight to a waiting session does not end the wait.
      if (holder !== null) await lock.waiters.waitUntilFree(lock.key, pollMs, waiting.signal);
      else await sleep(systemClock, pollMs, waiting.signal);
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    } finally {
      waiting.dispose();
    }
  }
}
