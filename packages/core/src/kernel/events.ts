import type { LockLostError, LockLostReason } from "../contract/errors.js";
import type { EventHub } from "../observability/event-hub.js";
import type { Lock } from "./lock.js";

/** Every event a coordinator emits, with its payload. Metrics are built on these. */
export interface CoordinatorEvents {
  /**
   * A lock (or a semaphore's permit, a read or a write) was granted. `waitedMs` counts from
   * the call to the grant. `lock` is the granted lock itself: the same object `lost` and
   * `released` carry, so listeners can tell apart several permits of one name.
   */
  acquired: { name: string; token: bigint; waitedMs: number; lock: Lock };
  /** A session renewal was confirmed. `locks` is how many locks it kept. */
  renewed: { durationMs: number; locks: number };
  /**
   * A renewal failed; the session lives until `remainingMs` runs out unless a retry succeeds.
   * `names` lists the locks that depend on it.
   */
  renewFailed: { error: unknown; remainingMs: number; names: readonly string[] };
  /** A lock can no longer be trusted (its signal aborted with `error`). Not emitted on release. */
  lost: { name: string; token: bigint; reason: LockLostReason; error: LockLostError; lock: Lock };
  /** A lock was released; `wasHeld` is false when it had already been lost. */
  released: { name: string; token: bigint; wasHeld: boolean; lock: Lock };
  /** A backend session opened with the TTL the store granted. */
  sessionOpened: { ownerId: string; ttlMs: number };
  /** The backend session ended for a reason other than `close()`; every lock on it was lost. */
  sessionLost: { error: unknown };
  /** A background step failed that affects no lock (e.g. closing a dead session). */
  backgroundError: { error: unknown; during: string };
}

/** Name of a {@link CoordinatorEvents} event. */
export type CoordinatorEventName = keyof CoordinatorEvents;

/** A listener of event `E`. */
export type CoordinatorListener<E extends CoordinatorEventName> = (
  payload: CoordinatorEvents[E],
) => void;

/** The coordinator's event hub: the kernel and every recipe emit on it. */
export type CoordinatorEventHub = EventHub<CoordinatorEvents>;
