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
