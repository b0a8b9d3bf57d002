import type { Grant, Holder, LockBackend } from "../contract/backend.js";
import {
  asUnavailable,
  BackendUnavailableError,
  isAbortError,
  LockHeldError,
  SessionLostError,
  StaleTokenError,
} from "../contract/errors.js";
import type { Fence } from "../contract/fence.js";
import { isTransient } from "../contract/transient.js";
import { AbortScope } from "../helpers/abort-scope.js";
import { type BackoffOptions, backoffMs } from "../helpers/backoff.js";
import { pausedWithin, pauseNote, raceAbortable } from "../helpers/bounded-call.js";
import { type Clock, sleep, type Timer, type TimerOptions } from "../helpers/clock.js";
import { KeyedMutex, type KeyTurn, NO_TURN } from "../helpers/keyed-mutex.js";
import { LinkedList } from "../helpers/linked-list.js";
import { noop } from "../helpers/noop.js";
import { AcquireCall, type CallSignals } from "./acquire-call.js";
import type { CoordinatorEventHub } from "./events.js";
import { HandOffs } from "./hand-off.js";
import { HeldLock, type LockHost } from "./held-lock.js";
import { closedError, type Lifecycle } from "./lifecycle.js";
import type { Lock } from "./lock.js";
import type { ManagedSession } from "./managed-session.js";
import type { ResolvedAcquire } from "./options.js";
import { type GrantRequest, LOCK_REQUEST } from "./requests.js";
import type { SessionPool } from "./session-pool.js";

const RETRY: BackoffOptions = { minMs: 20, maxMs: 1_000 };
/** How long a given-up permit wait waits for its backend to take its queue entry out. */
const CLEANUP_GRACE_MS = 1_000;
const KEEP_ALIVE: TimerOptions = { keepAlive: true };

/** The coordinator's warning thresholds (ms); undefined: none. */
export interface Thresholds {
  readonly warnHeldMs: number | undefined;
  readonly warnWaitMs: number | undefined;
}

const NO_THRESHOLDS: Thresholds = { warnHeldMs: undefined, warnWaitMs: undefined };

/**
 * The acquire pipeline: one call from the in-process queue to a lock handed over. Each
 * attempt takes the session for the call's TTL, sends the backend's acquire (or, for a
 * permit request, `acquirePermits`), and turns a grant into a held lock; a failed attempt is
 * retried with backoff while the store is reachable, a grant lost before the hand-over is
 * tried again, a grant that comes after the call gave up is released, and in correctness
 * mode the fence is raised with the new token before anyone uses the lock.
 */
export class AcquirePipeline {
  readonly #ttlMs: number;
  readonly #clock: Clock;
  readonly #events: CoordinatorEventHub;
  readonly #sessions: SessionPool;
  readonly #lifecycle: Lifecycle;
  /** The fence every grant raises before the hand-over: correctness mode's, if it has one. */
  readonly #fence: Fence | undefined;
  /** This process's queue per name: one call of a name at the store at a time. */
  readonly #local = new KeyedMutex();
  /** Hand-off windows for the waiters of a backend without a queue (set once one is open). */
  #handOffs: HandOffs | undefined;
  /** What every HeldLock of this coordinator shares. */
  readonly #host: LockHost;
  /** In-flight acquire calls, ended by close(). */
  readonly #calls = new LinkedList<AcquireCall>();
  /** What every call reports to. */
  readonly #signals: CallSignals;

  constructor(
    ttlMs: number,
    clock: Clock,
    events: CoordinatorEventHub,
    sessions: SessionPool,
    lifecycle: Lifecycle,
    fence: Fence | undefined,
    backend: LockBackend | undefined,
    thresholds: Thresholds = NO_THRESHOLDS,
    holderOf?: (name: string) => Promise<Holder | null>,
  ) {
    this.#ttlMs = ttlMs;
    this.#clock = clock;
    this.#events = events;
    this.#sessions = sessions;
    this.#lifecycle = lifecycle;
    this.#fence = fence;
    this.#host = {
      clock,
      events,
      fencing: backend?.guarantees.fencing,
      warnHeldMs: thresholds.warnHeldMs,
    };
    this.#signals = { events, warnWaitMs: thresholds.warnWaitMs, holderOf };
  }

  /** Called before a session of `backend` opens: what the pipeline learns from it. */
  backendOpening(backend: LockBackend): void {
    this.#host.fencing = backend.guarantees.fencing;
    if (!backend.guarantees.fifo)
      this.#handOffs ??= new HandOffs(
        this.#clock,
        backend.guarantees.tokenCounter === "per-key",
        backend.guarantees.waiters,
      );
  }

  /** Ends every call under way with `reason` (for `close()`). */
  abortAll(reason: unknown): void {
    for (const call of this.#calls.toArray()) call.scope.abort(reason);
  }

  /**
   * Acquires `name`. When it is held and the call may not wait, the call ends as `whenHeld`
   * says (`acquire` rejects, `tryAcquire` resolves with null); every error is raised by the
   * step it ends (see each step).
   *
   * The usual acquire (the name free here, a live session, no fence to raise) makes its first
   * attempt as one promise chain (`#firstAttempt`); anything else, and whatever that attempt
   * does not settle itself, goes through the attempt loop (`#attempts`).
   */
  acquire<H>(
    name: string,
    opts: ResolvedAcquire,
    whenHeld: WhenHeld<H>,
    request: GrantRequest = LOCK_REQUEST,
  ): Promise<Lock | H> {
    let call: AcquireCall;
    try {
      this.#lifecycle.assertOpen();
      call = new AcquireCall(
        name,
        opts,
        this.#ttlMs,
        this.#clock,
        request,
        this.#signals,
        this.#handOffs,
      );
    } catch (error) {
      if (this.#events.listens("acquireFailed")) {
        this.#events.emit("acquireFailed", { name, error, waitedMs: 0, attempts: 0 });
      }
      return Promise.reject(error);
    }
    this.#calls.add(call);
    // Hot path: see docs/hot-path.md, "Core".
    try {
      if (!request.exclusive) {
        // Permits of one name are held many at once: no in-process queue.
        call.localTurn = NO_TURN;
        if (!call.scope.aborted && request.fence(this.#fence) === undefined) {
          const session = this.#sessions.live(opts.ttlMs);
          if (session !== undefined) return this.#firstAttempt(call, session, whenHeld);
        }
      } else if (!call.scope.aborted && (call.waiting || !this.#local.isLocked(name))) {
        call.localTurn = this.#local.tryLock(name);
        if (call.localTurn !== undefined && this.#fence === undefined && call.holdOffMs === 0) {
          const session = this.#sessions.live(opts.ttlMs);
          if (session !== undefined) return this.#firstAttempt(call, session, whenHeld);
        }
      }
    } catch (error) {
      this.#failed(call, error);
      this.#endCall(call);
      return Promise.reject(error);
    }
    return this.#attempts(call, whenHeld, 0, undefined);
  }

  /**
   * The first attempt of an acquire that holds its name here and has a live session, with no
   * fence: the backend's acquire raced against the call's scope, the grant handed over from
   * its callback. A failure, an abort or a session that died meanwhile goes on in the attempt
   * loop, exactly as if the loop had made this attempt.
   */
  #firstAttempt<H>(
    call: AcquireCall,
    session: ManagedSession,
    whenHeld: WhenHeld<H>,
  ): Promise<Lock | H> {
    // Hot path: see docs/hot-path.md, "Core".
    const backendSession = session.backendSession;
    const scope = call.scope;
    let pending: Promise<Grant | null>;
    try {
      call.attempts++;
      pending = call.request.send(backendSession, call);
      if (!call.request.exclusive && call.waiting) call.inFlight = pending;
    } catch (error) {
      return this.#attempts(call, whenHeld, 1, { session, error });
    }
    return new Promise<Lock | H>((resolve, reject) => {
      let settled = false;
      const onAbort = (reason: unknown) => {
        settled = true;
        this.#releaseLate(pending, backendSession, call.name, scope);
        resolve(this.#attempts(call, whenHeld, 1, { session, error: reason }));
      };
      if (scope.aborted) return onAbort(scope.reason);
      scope.addCallback(onAbort);
      pending.then(
        (grant) => {
          if (settled) return;
          scope.removeCallback(onAbort);
          // The session died under us: that grant is void; the loop tries again.
          if (grant !== null && !session.isValid()) {
            resolve(this.#attempts(call, whenHeld, 1, undefined));
            return;
          }
          try {
            if (grant === null) {
              call.foundTaken();
              resolve(whenHeld(call.name));
            } else resolve(this.#handOver(call, this.#hold(call, grant, session)));
          } catch (error) {
            this.#failed(call, error);
            reject(error);
          } finally {
            this.#endCall(call);
          }
        },
        (error: unknown) => {
          if (settled) return;
          scope.removeCallback(onAbort);
          resolve(this.#attempts(call, whenHeld, 1, { session, error }));
        },
      );
    });
  }

  /**
   * The attempt loop of an acquire, from `attempt`. `failed` is the attempt before it, when
   * it failed (the backend's acquire threw, rejected or was given up on): it is handled first.
   */
  async #attempts<H>(
    call: AcquireCall,
    whenHeld: WhenHeld<H>,
    from: number,
    failed: { session: ManagedSession; error: unknown } | undefined,
  ): Promise<Lock | H> {
    const { name, options: opts } = call;
    try {
      if (from === 0) {
        if (call.scope.aborted) throw call.scope.reason; // an already-aborted signal: no round trip at all
        if (call.localTurn === undefined) {
          // Another acquire of the name in this process is ahead: the lock is taken.
          if (this.#local.isLocked(name)) {
            call.foundTaken();
            if (!call.waiting) return whenHeld(name);
          }
          call.localTurn = await this.#waitLocal(call);
        }
        if (call.holdOffMs > 0) await this.#holdOff(call);
      } else if (failed !== undefined) {
        await this.#afterAcquireFailed(call, from - 1, failed.error, failed.session);
      }
      for (let attempt = from; ; attempt++) {
        this.#lifecycle.assertOpen();
        const session = this.#sessions.live(opts.ttlMs) ?? (await this.#openFor(call, attempt));
        if (session === undefined) continue;
        let grant: Grant | null;
        try {
          grant = await this.#backendAcquire(session, call);
        } catch (error) {
          await this.#afterAcquireFailed(call, attempt, error, session);
          continue;
        }
        if (grant === null) {
          call.foundTaken();
          return whenHeld(name);
        }
        if (!session.isValid()) continue; // the session died under us: that grant is void
        const held = this.#hold(call, grant, session);
        // Without a fence the grant is handed over as it is: the session was checked just now.
        const fence = call.request.fence(this.#fence);
        if (fence === undefined) return this.#handOver(call, held);
        await this.#raiseFence(fence, held, call);
        if (held.lock.held) return this.#handOver(call, held);
        await this.#afterLostGrant(call, held, attempt);
      }
    } catch (error) {
      this.#failed(call, error);
      throw error;
    } finally {
      this.#endCall(call);
    }
  }

  /** The call rejects with `error`: its wait ends, and listeners hear of it. */
  #failed(call: AcquireCall, error: unknown): void {
    call.failed(error, this.#lifecycle.closing.signal.aborted);
  }

  /** The call is over: its name is freed here (unless a held lock took it over), its bounds end. */
  #endCall(call: AcquireCall): void {
    call.localTurn?.end();
    call.end();
    this.#calls.delete(call);
  }

  /** Waits in this process's queue for the name (FIFO), for as long as the call may wait. */
  async #waitLocal(call: AcquireCall): Promise<KeyTurn> {
    try {
      return await this.#local.lock(call.name, call.scope);
    } catch {
      throw this.#cutShort(call, () => call.timeout());
    }
  }

  /**
   * Opens the session for the call's TTL; undefined when the open failed and the call may try
   * again. An open counts as a failure to reach the store from when it began.
   */
  async #openFor(call: AcquireCall, attempt: number): Promise<ManagedSession | undefined> {
    const began = this.#clock.now();
    try {
      const session = await this.#sessions.sessionFor(call.options.ttlMs, call.scope);
      call.reached();
      return session;
    } catch (error) {
      if (call.scope.aborted) throw this.#cutShort(call, () => call.noAnswer("opening a session"));
      await this.#retry(call, attempt, error, began, () => call.storeFailed(error));
      return undefined;
    }
  }

  /**
   * After a failed backend acquire: rejects with the call's error, or resolves when the call
   * may try again. A session lost during a wait means the store answered and the lock was held
   * elsewhere, so a wait that runs out after it is a timeout (a waiter frozen past its wait
   * and its session wakes to exactly this), never a session or store error.
   */
  async #afterAcquireFailed(
    call: AcquireCall,
    attempt: number,
    error: unknown,
    session: ManagedSession,
  ): Promise<void> {
    if (call.scope.aborted) {
      await this.#cleanupGrace(call);
      // A timeout says the lock stayed held; a wait whose tries never heard so is a store that
      // did not answer (a Redis Cluster refusing with CLUSTERDOWN, a store that stalls).
      throw this.#cutShort(call, () =>
        call.waiting && call.contended ? call.timeout() : call.noAnswer("acquiring"),
      );
    }
    if (!(error instanceof SessionLostError)) {
      return await this.#retry(call, attempt, error, this.#clock.now(), () =>
        call.storeFailed(error),
      );
    }
    session.lose("session-lost", error);
    await this.#retry(call, attempt, error, this.#clock.now(), () => call.timeout(error));
  }

  /**
   * Whether a failed attempt is tried again: an error not known to be transient rejects the
   * call; a try gets one more go at once after a lost session; a wait backs off, and gives up
   * on a store failing since `failingSince` for too long. When the wait runs out during the
   * backoff, rejects with `budgetError()`.
   */
  async #retry(
    call: AcquireCall,
    attempt: number,
    error: unknown,
    failingSince: number,
    budgetError: () => unknown,
  ): Promise<void> {
    const sessionLost = error instanceof SessionLostError;
    if (!sessionLost && !isTransient(error)) throw error;
    call.lastFailure = error;
    if (!call.waiting) {
      // A try answers at once: one more go on a fresh session, no backoff.
      if (sessionLost && attempt === 0) return;
      throw asUnavailable(error, `could not acquire "${call.name}"`);
    }
    if (!sessionLost) call.giveUpIfUnreachable(error, failingSince);
    try {
      await sleep(this.#clock, backoffMs(attempt, RETRY), call.scope.ownSignal);
    } catch {
      throw this.#cutShort(call, budgetError);
    }
  }

  /**
   * The error of a step the call's scope cut short: the caller's reason, the coordinator's
   * close, or else the wait ran out (`budgetError()`, which depends on the step).
   */
  #cutShort(call: AcquireCall, budgetError: () => unknown): unknown {
    const signal = call.options.signal;
    if (signal?.aborted) return signal.reason;
    if (this.#lifecycle.closing.signal.aborted) return closedError();
    return budgetError();
  }

  /** A hand-off window: waiters of other processes get a turn (see `HandOffs`). */
  async #holdOff(call: AcquireCall): Promise<void> {
    try {
      await call.holdOff();
    } catch {
      throw this.#cutShort(call, () => call.timeout());
    }
  }

  /** The grant becomes a held lock, which frees the name here when it ends. */
  #hold(call: AcquireCall, grant: Grant, session: ManagedSession): HeldLock {
    call.granted(grant.token);
    const localTurn = call.endsHere(call.localTurn ?? NO_TURN);
    call.localTurn = undefined;
    return new HeldLock(
      call.name,
      grant,
      call.options.value,
      session,
      localTurn,
      this.#host,
      call.request.permit,
      call.options.warnHeldMs,
    );
  }

  /** The lock goes to the caller. */
  #handOver(call: AcquireCall, held: HeldLock): Lock {
    if (call.inWait) call.waitEnds("acquired");
    if (this.#events.listens("acquired")) {
      this.#events.emit("acquired", {
        name: held.name,
        token: held.token,
        waitedMs: this.#clock.now() - call.started,
        attempts: call.attempts,
        lock: held.lock,
      });
    }
    return held.lock;
  }

  /**
   * Never hand over a lost lock: the process may have been paused past the lease during the
   * fence raise, or the store ended the session meanwhile (`held` checks the local deadline
   * on the spot). Such a grant was never the caller's: the call tries again within its wait
   * (a try: once), or rejects with a `LockTimeoutError` caused by the loss (a try: the loss).
   */
  async #afterLostGrant(call: AcquireCall, held: HeldLock, attempt: number): Promise<void> {
    const lost = held.ended.reason; // the LockLostError; losing it freed the name here
    call.lastFailure = lost;
    if (call.scope.aborted) throw this.#cutShort(call, () => call.timeout(lost));
    if (!call.waiting && attempt > 0) throw lost;
    if (!call.resumeBudget()) throw call.waiting ? call.timeout(lost) : lost;
    call.localTurn = call.request.exclusive
      ? (this.#local.tryLock(call.name) ?? (await this.#waitLocal(call)))
      : NO_TURN;
  }

  /**
   * A permit wait given up on (cancelled, timed out) rejects once the backend has taken its
   * queue entry out, or after a short bound: an acquire that comes right after the rejection
   * then never finds the abandoned entry ahead of it. A backend that honours the abort
   * answers within a round trip.
   */
  async #cleanupGrace(call: AcquireCall): Promise<void> {
    const inFlight = call.inFlight;
    call.inFlight = undefined;
    if (inFlight === undefined) return;
    let timer: Timer | undefined;
    await Promise.race([
      inFlight.then(noop, noop),
      new Promise<void>((resolve) => {
        timer = this.#clock.setTimer(resolve, CLEANUP_GRACE_MS, KEEP_ALIVE);
      }),
    ]);
    timer?.cancel();
  }

  /**
   * The backend's acquire, bounded by `signal` even if the backend ignores it. A grant that
   * arrives after we gave up is released in the background, so nothing is left behind.
   */
  #backendAcquire(session: ManagedSession, call: AcquireCall): Promise<Grant | null> {
    const { name, scope } = call;
    const backendSession = session.backendSession;
    call.attempts++;
    const pending = call.request.send(backendSession, call);
    if (!call.request.exclusive && call.waiting) call.inFlight = pending;
    return raceAbortable(pending, scope, {
      onAbandoned: (late) => this.#releaseLate(late, backendSession, name, scope),
    });
  }

  /** A grant that arrives after its acquire was given up is released in the background. */
  #releaseLate(
    late: Promise<Grant | null>,
    backendSession: ManagedSession["backendSession"],
    name: string,
    scope: AbortScope,
  ): void {
    void late
      .then((grant) => (grant === null ? false : backendSession.release(grant)))
      .catch((error: unknown) => {
        // The backend honoured the abort: nothing was granted, nothing to report.
        if (error === scope.reason || isAbortError(error)) return;
        this.#events.emit("backgroundError", {
          error,
          during: `releasing a late grant of "${name}"`,
        });
      });
  }

  /**
   * Correctness mode: raises the fence with the new token before anyone uses the lock, within
   * the lock's TTL (a raise slower than the lease could not hand over a trusted lock anyway),
   * whatever the wait does meanwhile. A raise that fails releases the grant and rejects with
   * the fence's own error (or the caller's reason, or `CoordinatorClosedError`).
   */
  async #raiseFence(fence: Fence, held: HeldLock, call: AcquireCall): Promise<void> {
    const raise = new AbortScope().follow(call.options.signal);
    this.#lifecycle.pending.add(raise);
    const armedAt = this.#clock.now();
    let pausedMs = 0;
    const timer = this.#clock.setTimer(
      () => {
        pausedMs = pausedWithin(armedAt, held.ttlMs, this.#clock.now());
        raise.abort(new Error("baton: the fence raise ran out of time"));
      },
      held.ttlMs,
      KEEP_ALIVE,
    );
    try {
      // The fence gets the signal too, so a raise given up on is cancelled, not left to
      // commit later (and to hold a connection open meanwhile).
      const raised = fence.raise(held.name, held.token, {
        signal: raise.signal,
        ttlMs: held.ttlMs,
      });
      await raceAbortable(raised, raise);
    } catch (error) {
      if (error instanceof StaleTokenError) held.markLost("fence-rejected", error);
      await held.lock.release().catch(() => undefined);
      throw raise.aborted ? this.#cutShort(call, () => fenceTimeout(held, pausedMs)) : error;
    } finally {
      timer.cancel();
      raise.dispose();
      this.#lifecycle.pending.delete(raise);
    }
  }
}

/**
 * The error of a fence raise that did not answer within the lock's TTL. When this process was
 * itself paused through much of that time, it says so rather than blaming the fence's store.
 */
function fenceTimeout(held: HeldLock, pausedMs: number): BackendUnavailableError {
  const what = `the fence did not answer within ${held.ttlMs} ms (the lock's TTL) when raised with the new token of "${held.name}", so the grant was released`;
  return new BackendUnavailableError(
    pausedMs > 0
      ? `${what}${pauseNote(pausedMs)}`
      : `${what}; check that the fence's store is reachable and that nothing else holds the fence's row locked`,
  );
}

/**
 * How an acquire that finds the lock held and may not wait ends: with what this returns, or
 * with what it throws. A held lock is the usual answer of a try, so it is no exception there:
 * throwing one costs more than the whole try on a local store.
 */
export type WhenHeld<H> = (name: string) => H;

export const rejectHeld: WhenHeld<never> = (name) => {
  throw new LockHeldError(name);
};

export const nullWhenHeld: WhenHeld<null> = () => null;
