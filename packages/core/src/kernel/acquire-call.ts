import type { Holder } from "../contract/backend.js";
import {
  asUnavailable,
  BackendUnavailableError,
  CoordinatorClosedError,
  LockTimeoutError,
} from "../contract/errors.js";
import { AbortScope } from "../helpers/abort-scope.js";
import type { Clock, Timer } from "../helpers/clock.js";
import type { KeyTurn } from "../helpers/keyed-mutex.js";
import type { Linked } from "../helpers/linked-list.js";
import { setBound } from "../helpers/timer-lists.js";
import type { CoordinatorEventHub, CoordinatorEvents } from "./events.js";
import type { HandOffs } from "./hand-off.js";
import { unreachableBoundMs } from "./managed-session.js";
import type { ResolvedAcquire } from "./options.js";
import type { GrantRequest } from "./requests.js";

/** What every acquire call of a coordinator reports to: its events, its `warnWaitMs`. */
export interface CallSignals {
  readonly events: CoordinatorEventHub;
  /** The coordinator's `warnWaitMs`, or undefined for none. */
  readonly warnWaitMs: number | undefined;
  /** Reads a lock's holder at the store (bounded), for the `waitingTooLong` warning. */
  readonly holderOf?: ((name: string) => Promise<Holder | null>) | undefined;
}

/** How a wait that began ended (see the `waitEnded` event). */
export type WaitOutcome = CoordinatorEvents["waitEnded"]["outcome"];

/**
 * One acquire call's bounds and the errors it ends with: its wait (one TTL for a try, so
 * nothing hangs), the scope that ends on the caller's signal, on `close()` and when the wait
 * runs out, and how long the store has failed without an answer in between.
 *
 * @internal
 */
export class AcquireCall implements Linked<AcquireCall> {
  readonly name: string;
  readonly options: ResolvedAcquire;
  /** A lock, or permits of a semaphore or a read-write lock: see {@link GrantRequest}. */
  readonly request: GrantRequest;
  /** False for a try (`tryAcquire`, `waitMs: 0`): it answers at once when the lock is held. */
  readonly waiting: boolean;
  /** The bound of the whole call: `waitMs`, or one TTL for a try. */
  readonly budgetMs: number;
  /** When the call began (monotonic). */
  readonly started: number;
  /**
   * Ends on the caller's signal, on `close()` and when the wait runs out. Its `AbortSignal` is
   * built only if the backend asks for it (a wait).
   */
  readonly scope: CallScope;
  /**
   * How long this call holds off before it asks the backend, in ms: on a backend without a
   * queue, a hand-off window after a contended lock of the name ended here (see `HandOffs`).
   */
  readonly holdOffMs: number;
  /** Frees the name in this process, while the call holds it (a held lock then takes it over). */
  localTurn: KeyTurn | undefined;
  /** The backend call of the latest attempt of a permit wait, until the call ends. */
  inFlight: Promise<unknown> | undefined;
  /** The error of the last failed attempt: the cause of a later give-up. */
  lastFailure: unknown;
  /** How many times the store was asked (each backend acquire sent). */
  attempts = 0;
  /** Whether the call found the lock taken (see {@link foundTaken}). */
  contended = false;
  /** Whether a wait began and has not ended yet: `waitEnded` is owed. */
  inWait = false;
  /** Links in the coordinator's in-flight calls. */
  prevLinked: AcquireCall | undefined;
  nextLinked: AcquireCall | undefined;
  readonly #clock: Clock;
  readonly #handOffs: HandOffs | undefined;
  /** The TTL of the lock asked for. */
  readonly #lockTtlMs: number;
  /** Past this many ms of failures without an answer, a wait gives up on the store. */
  readonly #unreachableMs: number;
  #unreachableSince: number | undefined;
  #budget: Timer | undefined;
  readonly #signals: CallSignals;
  /** The `warnWaitMs` timer, while a wait runs with a threshold set. */
  #waitWarning: Timer | undefined;

  constructor(
    name: string,
    options: ResolvedAcquire,
    ttlMs: number,
    clock: Clock,
    request: GrantRequest,
    signals: CallSignals,
    handOffs?: HandOffs,
  ) {
    this.name = name;
    this.options = options;
    this.request = request;
    this.waiting = options.waitMs > 0;
    this.budgetMs = this.waiting ? options.waitMs : ttlMs;
    this.#clock = clock;
    this.#signals = signals;
    this.started = clock.now();
    this.#lockTtlMs = options.ttlMs ?? ttlMs;
    this.#unreachableMs = Math.min(this.budgetMs, unreachableBoundMs(this.#lockTtlMs));
    // Plain locks only: permits of one name are held many at once, and a try answers at once.
    this.#handOffs = request.exclusive ? handOffs : undefined;
    const holdOffMs =
      this.#handOffs !== undefined && this.waiting
        ? this.#handOffs.holdOffMs(name, this.#lockTtlMs)
        : 0;
    // A short wait keeps its time for the lock itself.
    this.holdOffMs = holdOffMs * 2 < this.budgetMs ? holdOffMs : 0;
    this.scope = new CallScope(this).follow(options.signal);
    this.#armBudget(this.budgetMs);
  }

  /**
   * Waits out {@link holdOffMs}; rejects with the scope's reason when it ends first. Listens
   * to the scope without building its signal, which tells whether the backend waited.
   */
  holdOff(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.scope.aborted) {
        reject(this.scope.reason);
        return;
      }
      const onAbort = (reason: unknown) => {
        timer.cancel();
        reject(reason);
      };
      const timer = this.#clock.setTimer(() => {
        this.scope.removeCallback(onAbort);
        resolve();
      }, this.holdOffMs);
      this.scope.addCallback(onAbort);
    });
  }

  /**
   * The grant of `token` ends the wait (the fence raise that may follow has its own bound).
   * A backend reads the wait's signal only when the lock was held at its first look (it was
   * about to wait): then other processes want the name too, which the hand-offs remember; so
   * do they when a grant after a hold-off shows the name was granted elsewhere meanwhile.
   */
  granted(token: bigint): void {
    this.stopBudget();
    const handOffs = this.#handOffs;
    if (handOffs === undefined) return;
    // One ask that found the name free: its time is the store's round trip (see `HandOffs`).
    const askedAt =
      this.attempts === 1 && !this.contended ? this.started + this.holdOffMs : undefined;
    handOffs.granted(this.name, token, this.scope.signalRead, this.holdOffMs > 0, askedAt);
  }

  /** `turn`, the name's turn the lock taken by this call keeps: its end tells the hand-offs. */
  endsHere(turn: KeyTurn): KeyTurn {
    return this.#handOffs === undefined ? turn : turn.follow(this.#handOffs, this.#lockTtlMs);
  }

  /**
   * The call found the lock taken: a try's store answered "held", the backend is about to
   * wait (it read the wait's signal), or another acquire of the name in this process is
   * ahead of it. Emits `contended` once; a waiting call then begins its wait: `waitStarted`,
   * and the `warnWaitMs` timer when a threshold is set.
   */
  foundTaken(): void {
    // Hot path (not run on the uncontended acquire): see docs/hot-path.md, "Core".
    if (this.contended) return;
    this.contended = true;
    const events = this.#signals.events;
    const name = this.name;
    if (events.listens("contended")) events.emit("contended", { name });
    if (!this.waiting || this.scope.aborted) return;
    this.inWait = true;
    if (events.listens("waitStarted")) events.emit("waitStarted", { name });
    const thresholdMs = this.options.warnWaitMs ?? this.#signals.warnWaitMs;
    if (thresholdMs === undefined || thresholdMs === 0) return;
    const clock = this.#clock;
    this.#waitWarning = clock.setTimer(
      () => {
        this.#waitWarning = undefined;
        if (!this.inWait) return;
        // A timer may fire a fraction of a millisecond early on the clock's reading.
        const waitedMs = Math.max(thresholdMs, clock.now() - this.started);
        const warn = (holder?: Holder | null) => {
          events.emit("waitingTooLong", {
            name,
            waitedMs,
            thresholdMs,
            ...(holder ? { holder: { ownerId: holder.ownerId, token: holder.token } } : {}),
          });
        };
        // Who is waited for, as the store tells now: a lock's one holder (permits have many).
        const holderOf = this.#signals.holderOf;
        if (holderOf === undefined || !this.request.exclusive) warn();
        else holderOf(name).then(warn, () => warn());
      },
      Math.max(0, thresholdMs - (clock.now() - this.started)),
    );
  }

  /** The wait that began (if one did) ended with `outcome`: `waitEnded`, once. */
  waitEnds(outcome: WaitOutcome): void {
    if (!this.inWait) return;
    this.inWait = false;
    this.#waitWarning?.cancel();
    this.#waitWarning = undefined;
    const events = this.#signals.events;
    if (events.listens("waitEnded")) {
      events.emit("waitEnded", {
        name: this.name,
        waitedMs: this.#clock.now() - this.started,
        outcome,
      });
    }
  }

  /**
   * The call rejected with `error` (`closing`: the coordinator is closing): its wait ends,
   * and `acquireFailed` is emitted.
   */
  failed(error: unknown, closing: boolean): void {
    if (this.inWait) {
      const signal = this.options.signal;
      this.waitEnds(
        error instanceof LockTimeoutError
          ? "timeout"
          : closing ||
              error instanceof CoordinatorClosedError ||
              (signal?.aborted === true && error === signal.reason)
            ? "aborted"
            : "error",
      );
    }
    const events = this.#signals.events;
    if (events.listens("acquireFailed")) {
      events.emit("acquireFailed", {
        name: this.name,
        error,
        waitedMs: this.#clock.now() - this.started,
        attempts: this.attempts,
      });
    }
  }

  /** A grant ends the wait: the fence raise that may follow has its own bound. */
  stopBudget(): void {
    this.#budget?.cancel();
  }

  /** After a grant that was lost before the hand-over: the wait goes on, if anything is left. */
  resumeBudget(): boolean {
    const leftMs = this.budgetMs - (this.#clock.now() - this.started);
    if (leftMs <= 0) return false;
    this.#armBudget(leftMs);
    return true;
  }

  /** Ends the call's bounds (the scope stops following the caller's signal). */
  end(): void {
    this.#budget?.cancel();
    // A wait still owed an end here ended without a grant or an error of its own.
    if (this.inWait) this.waitEnds("error");
    this.scope.dispose();
  }

  /** The store answered (a new session opened): failures count from zero again. */
  reached(): void {
    this.#unreachableSince = undefined;
  }

  /**
   * Counts a failure without an answer from the store, from `since` for the first of a row;
   * throws once they have lasted `unreachableMs`, without waiting out `waitMs`.
   */
  giveUpIfUnreachable(error: unknown, since: number): void {
    this.#unreachableSince ??= since;
    const forMs = this.#clock.now() - this.#unreachableSince;
    if (forMs >= this.#unreachableMs) throw unreachableError(error, this.name, forMs);
  }

  /** The wait ran out while the lock stayed held elsewhere. */
  timeout(cause?: unknown): LockTimeoutError {
    const waitMs = this.options.waitMs;
    if (cause === undefined) return new LockTimeoutError(this.name, waitMs);
    return new LockTimeoutError(this.name, waitMs, { cause });
  }

  /** The wait ran out during a backoff after `error`, a failure to reach the store. */
  storeFailed(error: unknown): Error {
    return asUnavailable(
      error,
      `could not reach the store for "${this.name}" within ${this.budgetMs} ms`,
    );
  }

  /**
   * The wait ran out while a call to the store (`during`) had no answer. The last failure's
   * message, which names the store's host, follows when an earlier attempt failed.
   */
  noAnswer(during: "opening a session" | "acquiring"): BackendUnavailableError {
    const last = this.lastFailure;
    const detail =
      last === undefined
        ? ""
        : `; the attempt before failed: ${last instanceof Error ? last.message : String(last)}`;
    return new BackendUnavailableError(
      `the store did not answer for "${this.name}" within ${this.budgetMs} ms (while ${during})${detail}`,
      { cause: last },
    );
  }

  #armBudget(ms: number): void {
    this.#budget = setBound(
      this.#clock,
      () => this.scope.abort(new Error("baton: budget ran out")),
      ms,
      true,
    );
  }
}

/**
 * An acquire call's scope, which tells whether its signal was asked for: a backend reads it
 * only when it is about to wait, so the first read means the lock was taken.
 */
class CallScope extends AbortScope {
  /** True once someone (the backend, about to wait) asked for the signal. */
  signalRead = false;
  readonly #call: AcquireCall;

  constructor(call: AcquireCall) {
    super();
    this.#call = call;
  }

  override get signal(): AbortSignal {
    if (!this.signalRead) {
      this.signalRead = true;
      this.#call.foundTaken();
    }
    return super.signal;
  }

  /** The signal, for core's own waits (a backoff): reading it says nothing about the lock. */
  get ownSignal(): AbortSignal {
    return super.signal;
  }
}

/**
 * The error of an acquire that gave up on a store it could not reach for `forMs`: the
 * store's own error (naming the host) as the cause and in the message, and what to check.
 */
function unreachableError(error: unknown, name: string, forMs: number): BackendUnavailableError {
  const detail = error instanceof Error ? error.message : String(error);
  return new BackendUnavailableError(
    `could not reach the store for "${name}": ${detail}. Gave up after ${Math.round(forMs)} ms of failed attempts, without waiting out waitMs; check that the store is running and reachable from here`,
    { cause: error },
  );
}
