import type { LockLostError, LockLostReason } from "../contract/errors.js";
import { EventHub } from "../observability/event-hub.js";
import { type Logger, safeLog } from "../observability/logger.js";
import type { Lock } from "./lock.js";

/** Every event a coordinator emits, with its payload. Metrics are built on these. */
export interface CoordinatorEvents {
  /**
   * A lock (or a semaphore's permit, a read or a write) was granted. `waitedMs` counts from
   * the call to the grant. `lock` is the granted lock itself: the same object `lost` and
   * `released` carry, so listeners can tell apart several permits of one name.
   */
  acquired: { name: string; token: bigint; waitedMs: number; attempts: number; lock: Lock };
  /**
   * An acquire found the lock (or a semaphore's permits, a read or a write) taken at its
   * first look: held by another process, or by another acquire of the same name in this
   * one. At most once per acquire, before its `waitStarted`; a try (`tryAcquire`,
   * `waitMs: 0`) that finds the lock held emits it too, and no `waitStarted`.
   */
  contended: { name: string };
  /**
   * A waiting acquire found the lock taken and began to wait for it. Exactly one `waitEnded`
   * follows, when the acquire ends.
   */
  waitStarted: { name: string };
  /**
   * A wait that `waitStarted` began is over: the lock was `acquired` (the `acquired` event
   * follows), the wait ran out (`timeout`: a `LockTimeoutError`), the caller's signal or
   * `close()` ended it (`aborted`), or it failed otherwise (`error`, e.g. the store could not
   * be reached). `waitedMs` counts from the call, as `acquired`'s does.
   */
  waitEnded: {
    name: string;
    waitedMs: number;
    outcome: "acquired" | "timeout" | "aborted" | "error";
  };
  /**
   * An acquire rejected: `error` is what the caller got (`LockHeldError`, `LockTimeoutError`,
   * `BackendUnavailableError`, the signal's reason, `CoordinatorClosedError`, ...).
   * `waitedMs` counts from the call; `attempts` is how many times the store was asked (0
   * when the call ended before it asked). A try that finds the lock held and resolves
   * `null` is no failure and emits none.
   */
  acquireFailed: { name: string; error: unknown; waitedMs: number; attempts: number };
  /**
   * A lock has been held for `warnHeldMs` (`thresholdMs`): once per grant, at the threshold,
   * however often its session renews meanwhile. `heldMs` counts from the grant, on the
   * coordinator's monotonic clock. With a logger, it is logged as a warning too.
   */
  heldTooLong: {
    name: string;
    token: bigint;
    ownerId: string;
    heldMs: number;
    thresholdMs: number;
    lock: Lock;
  };
  /**
   * An acquire has waited for a held lock for `warnWaitMs` (`thresholdMs`) and still waits:
   * once per acquire. `waitedMs` counts from the call. `holder`: who held the lock then, as
   * the store told when asked at the threshold (a lock's acquire only; absent for permits and
   * when the store did not answer). With a logger, it is logged as a warning too.
   */
  waitingTooLong: {
    name: string;
    waitedMs: number;
    thresholdMs: number;
    holder?: { ownerId: string; token: bigint };
  };
  /** A session renewal was confirmed. `locks` is how many locks it kept. */
  renewed: { durationMs: number; locks: number };
  /**
   * A renewal failed; the session lives until `remainingMs` runs out unless a retry succeeds.
   * `names` lists the locks that depend on it.
   */
  renewFailed: { error: unknown; remainingMs: number; names: readonly string[] };
  /** A lock can no longer be trusted (its signal aborted with `error`). Not emitted on release. */
  lost: { name: string; token: bigint; reason: LockLostReason; error: LockLostError; lock: Lock };
  /**
   * A lock was released; `wasHeld` is false when it had already been lost (or when a release
   * sent again after a connection failure found it freed by the first attempt).
   */
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

/**
 * The coordinator's event hub. With a logger, every background failure reaches it too,
 * listened to or not, and a lost lock is logged once, as an error.
 */
export function createEventHub(logger: Logger | undefined): CoordinatorEventHub {
  const events: CoordinatorEventHub = new EventHub(logger);
  if (logger === undefined) return events;
  // Every background failure reaches the logger too, listened to or not: an elect()-only
  // service whose campaign keeps failing (a bad URL option, an unreachable store) must
  // not fail in silence.
  events.on("backgroundError", ({ error, during }) => {
    const detail = error instanceof Error ? error.message : String(error);
    safeLog(logger, "warn", `baton: ${during} failed: ${detail}`, error);
  });
  // A threshold passed is a warning: the lock, who holds or wants it, and for how long.
  events.on("heldTooLong", ({ name, token, ownerId, heldMs, thresholdMs }) => {
    safeLog(
      logger,
      "warn",
      `baton: lock "${name}" (token ${token}) has been held by "${ownerId}" for ${Math.round(heldMs)} ms, past warnHeldMs (${thresholdMs} ms)`,
    );
  });
  events.on("waitingTooLong", ({ name, waitedMs, thresholdMs, holder }) => {
    const heldBy =
      holder === undefined ? "" : `, held by "${holder.ownerId}" (token ${holder.token})`;
    safeLog(
      logger,
      "warn",
      `baton: an acquire of "${name}" has waited ${Math.round(waitedMs)} ms for the lock${heldBy}, past warnWaitMs (${thresholdMs} ms), and still waits`,
    );
  });
  // A lost lock is logged once, as an error: the locks a session takes down together
  // (those lost in the same turn, for the same reason) on one line.
  const lost = new Map<string, CoordinatorEvents["lost"][]>();
  events.on("lost", (event) => {
    if (event.reason === "closed") return;
    const batch = lost.get(event.reason);
    if (batch !== undefined) {
      batch.push(event);
      return;
    }
    lost.set(event.reason, [event]);
    queueMicrotask(() => {
      const batched = lost.get(event.reason) ?? [];
      lost.delete(event.reason);
      safeLog(logger, "error", lostLine(batched), event.error);
    });
  });
  return events;
}

/** The log line of locks lost together: their count, the first few names, and why. */
function lostLine(events: readonly CoordinatorEvents["lost"][]): string {
  const first = events[0];
  if (first === undefined) return "baton: a lock was lost";
  const shown = events.slice(0, 5).map((e) => `"${e.name}"`);
  if (events.length > 5) shown.push(`and ${events.length - 5} more`);
  const what =
    events.length === 1
      ? `lock ${shown[0]} was`
      : `${events.length} locks (${shown.join(", ")}) were`;
  return `baton: ${what} lost (${first.reason}): ${first.error.message}`;
}
