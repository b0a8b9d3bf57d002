import { BackendUnavailableError, CoordinatorClosedError } from "../contract/errors.js";
import type { AbortScope } from "../helpers/abort-scope.js";
import type { Clock, TimerOptions } from "../helpers/clock.js";
import type { CoordinatorEventHub } from "./events.js";
import type { SessionLock } from "./managed-session.js";

const KEEP_ALIVE: TimerOptions = { keepAlive: true };

/** What `close()` stops, in its order; each kernel unit gives its part. */
export interface CloseParts {
  /** The backend's close the coordinator owes, if any (asked once, at the start). */
  owedBackendClose(): (() => Promise<void>) | undefined;
  /** Ends every acquire under way with `error`. */
  abortCalls(error: unknown): void;
  /** Resolves once every session being opened has opened or failed. */
  settleOpenings(): Promise<void>;
  /** Every lock held on the coordinator's sessions. */
  heldLocks(): SessionLock[];
  /** Closes every session (and forgets it); rejects with the first failure. */
  closeSessions(): Promise<void>;
}

/** Where `close()` is, for the report of a close that did not finish in time. */
interface CloseProgress {
  step: string;
  closeBackend?: (() => Promise<void>) | undefined;
  backendClosing?: boolean;
}

/**
 * A coordinator's life: open until `close()`, which stops things in order (running recipes,
 * then calls and reads under way, then locks, sessions and the backend) within a bound.
 */
export class Lifecycle {
  /** Aborts when `close()` starts stopping calls: every store call under way follows it. */
  readonly closing = new AbortController();
  /** In-flight reads and fence raises, ended by close(). */
  readonly pending = new Set<AbortScope>();
  readonly #clock: Clock;
  readonly #events: CoordinatorEventHub;
  /** The closes of running recipes (elections, partitions, schedules), called first on close. */
  readonly #recipeCloses = new Set<() => Promise<void>>();
  #closed = false;
  #closedPromise: Promise<void> | undefined;

  constructor(clock: Clock, events: CoordinatorEventHub) {
    this.#clock = clock;
    this.#events = events;
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Throws `CoordinatorClosedError` once `close()` was called. */
  assertOpen(): void {
    if (this.#closed) throw closedError();
  }

  /** Registers a recipe's close, called first on close; returns its unregistration. */
  track(close: () => Promise<void>): () => void {
    this.#recipeCloses.add(close);
    return () => {
      this.#recipeCloses.delete(close);
    };
  }

  /**
   * Closes once (a second call returns the first's promise), settling within `boundMs`
   * whatever the store does.
   */
  close(parts: CloseParts, boundMs: number): Promise<void> {
    if (this.#closed) return this.#closedPromise ?? Promise.resolve();
    this.#closed = true;
    this.#closedPromise = this.#closeWithin(parts, boundMs);
    return this.#closedPromise;
  }

  /**
   * Runs the steps of `close()`, but settles after `boundMs` whatever the store does: the
   * step still running is reported, the backend's close is started if it is owed and was not
   * yet, and the rest finishes (or not) in the background.
   */
  #closeWithin(parts: CloseParts, boundMs: number): Promise<void> {
    const progress: CloseProgress = { step: "stopping elections, partitions and schedules" };
    const steps = this.#closeSteps(parts, progress);
    return new Promise<void>((resolve, reject) => {
      const timer = this.#clock.setTimer(
        () => {
          resolve();
          steps.catch((error: unknown) => {
            this.#events.emit("backgroundError", { error, during: "closing the coordinator" });
          });
          this.#events.emit("backgroundError", {
            error: new BackendUnavailableError(
              `close() did not finish within ${boundMs} ms (one TTL, at least 5 s): still ${progress.step}; it returned without waiting, and the store frees what is left when its leases run out`,
            ),
            during: "closing the coordinator",
          });
          if (progress.closeBackend !== undefined && !progress.backendClosing) {
            progress.backendClosing = true;
            progress.closeBackend().catch((error: unknown) => {
              this.#events.emit("backgroundError", { error, during: "closing the backend" });
            });
          }
        },
        boundMs,
        KEEP_ALIVE,
      );
      steps.then(
        () => {
          timer.cancel();
          resolve();
        },
        (error: unknown) => {
          timer.cancel();
          reject(error);
        },
      );
    });
  }

  async #closeSteps(parts: CloseParts, progress: CloseProgress): Promise<void> {
    progress.closeBackend = parts.owedBackendClose();
    // Elections first: they give up leadership and run their onRevoked before the locks go.
    await Promise.allSettled([...this.#recipeCloses].map((close) => close()));
    this.closing.abort(closedError());
    parts.abortCalls(closedError());
    for (const scope of this.pending) scope.abort(closedError());
    progress.step = "opening a session";
    await parts.settleOpenings();
    // Each lock's signal aborts with reason `closed` before the release goes to the store.
    progress.step = "releasing locks";
    await Promise.allSettled(parts.heldLocks().map((held) => held.releaseOnClose()));
    try {
      progress.step = "closing the sessions";
      await parts.closeSessions();
    } finally {
      if (progress.closeBackend !== undefined && !progress.backendClosing) {
        progress.step = "closing the backend";
        progress.backendClosing = true;
        await progress.closeBackend();
      }
    }
  }
}

/** The error of any call made after `close()`. */
export function closedError(): CoordinatorClosedError {
  return new CoordinatorClosedError();
}
