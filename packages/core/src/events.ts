import type { LockLostError, LockLostReason } from "./errors.js";

/** Every event a coordinator emits, with its payload. Metrics are built on these. */
export interface CoordinatorEvents {
  /** A lock was granted. `waitedMs` counts from the call to the grant. */
  acquired: { name: string; token: bigint; waitedMs: number };
  /** A session renewal was confirmed. `locks` is how many locks it kept. */
  renewed: { durationMs: number; locks: number };
  /**
   * A renewal failed; the session lives until `remainingMs` runs out unless a retry succeeds.
   * `names` lists the locks that depend on it.
   */
  renewFailed: { error: unknown; remainingMs: number; names: readonly string[] };
  /** A lock can no longer be trusted (its signal aborted with `error`). Not emitted on release. */
  lost: { name: string; token: bigint; reason: LockLostReason; error: LockLostError };
  /** A lock was released; `wasHeld` is false when it had already been lost. */
  released: { name: string; token: bigint; wasHeld: boolean };
  /** A backend session opened with the TTL the store granted. */
  sessionOpened: { ownerId: string; ttlMs: number };
  /** The backend session ended for a reason other than `close()`; every lock on it was lost. */
  sessionLost: { error: unknown };
  /** This instance started campaigning in election `name`. */
  campaignStarted: { name: string };
  /** This instance became leader of election `name` for `term`. */
  elected: { name: string; term: bigint };
  /** This instance's term of election `name` ended. */
  revoked: { name: string; term: bigint; reason: string };
  /** A background step failed that affects no lock (e.g. closing a dead session). */
  backgroundError: { error: unknown; during: string };
}

/** Name of a {@link CoordinatorEvents} event. */
export type CoordinatorEventName = keyof CoordinatorEvents;

/** A listener of event `E`. */
export type CoordinatorListener<E extends CoordinatorEventName> = (
  payload: CoordinatorEvents[E],
) => void;

/** Minimal logger; `console` fits. */
export interface Logger {
  debug?(message: string, details?: unknown): void;
  warn?(message: string, details?: unknown): void;
  error?(message: string, details?: unknown): void;
}

/**
 * A small typed event hub. A listener that throws never breaks the emitter: the error goes
 * to the logger (or is reported on stderr when there is none).
 */
export class EventHub {
  readonly #listeners = new Map<CoordinatorEventName, Set<(payload: never) => void>>();
  readonly #logger: Logger | undefined;

  constructor(logger?: Logger) {
    this.#logger = logger;
  }

  /** Subscribes; returns the function that unsubscribes. */
  on<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): () => void {
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (payload: never) => void);
    return () => set.delete(listener as (payload: never) => void);
  }

  /**
   * Whether `event` has a listener: the hot path (every acquire and release) builds its
   * payload only then.
   */
  listens(event: CoordinatorEventName): boolean {
    const set = this.#listeners.get(event);
    return set !== undefined && set.size > 0;
  }

  /** Delivers `payload` to every listener of `event`, synchronously. */
  emit<E extends CoordinatorEventName>(event: E, payload: CoordinatorEvents[E]): void {
    const set = this.#listeners.get(event);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as CoordinatorListener<E>)(payload);
      } catch (error) {
        if (this.#logger?.error)
          safeLog(this.#logger, "error", `baton: a "${event}" listener threw`, error);
        else process.emitWarning(`baton: a "${event}" listener threw: ${String(error)}`);
      }
    }
  }
}

/** Calls `logger[level]` if present; a logger that throws is ignored, never propagated. */
export function safeLog(
  logger: Logger | undefined,
  level: keyof Logger,
  message: string,
  details?: unknown,
): void {
  try {
    logger?.[level]?.(message, details);
  } catch {
    // A broken logger must not break locking.
  }
}
