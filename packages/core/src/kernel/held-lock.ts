import type { Grant } from "../contract/backend.js";
import {
  asUnavailable,
  BackendUnavailableError,
  ConfigError,
  LockLostError,
  type LockLostReason,
} from "../contract/errors.js";
import type { Guarantees } from "../contract/guarantees.js";
import { isTransient } from "../contract/transient.js";
import { AbortScope } from "../helpers/abort-scope.js";
import { boundedCall } from "../helpers/bounded-call.js";
import type { Clock, Timer } from "../helpers/clock.js";
import { type KeyTurn, NO_TURN } from "../helpers/keyed-mutex.js";
import { setBound } from "../helpers/timer-lists.js";
import type { CoordinatorEventHub } from "./events.js";
import { Lock, type LockInit } from "./lock.js";
import type { ManagedSession, SessionLock } from "./managed-session.js";
import { Permit, type PermitRequest } from "./permit.js";

/** What a held lock needs from its coordinator. @internal */
export interface LockHost {
  readonly clock: Clock;
  readonly events: CoordinatorEventHub;
  /** The backend's declared fencing, once it is known (before its first session opens). */
  fencing: Guarantees["fencing"] | undefined;
  /** The coordinator's `warnHeldMs`, or undefined for none. */
  readonly warnHeldMs?: number | undefined;
}

/**
 * A lock the coordinator granted, as core keeps it: the session's entry (told when the lock
 * can no longer be trusted), what backs the user's {@link Lock} (release, deadline, checks)
 * and the coordinator's record of it, in one object with no closures.
 *
 * @internal
 */
export class HeldLock implements SessionLock, LockInit {
  // Hot path: see docs/hot-path.md, "Core".
  readonly name: string;
  readonly token: bigint;
  readonly value: string | undefined;
  readonly permit: boolean;
  /**
   * Ends (with a `LockLostError` reason) when the lock is lost or released. Its signal checks
   * the local deadline before it answers (see `check()`).
   */
  readonly ended = new AbortScope(this);
  /** The user's handle. */
  readonly lock: Lock;
  readonly #grant: Grant;
  readonly #session: ManagedSession;
  /** The name's turn in this process (KeyedMutex): ending it frees the name here, once. */
  readonly #localTurn: KeyTurn;
  readonly #host: LockHost;
  /** The acquire's own `warnHeldMs` (0: never), or undefined for the coordinator's. */
  readonly #warnHeldMs: number | undefined;
  /** The `warnHeldMs` timer, while the lock is held with a threshold set. */
  #heldWarning: Timer | undefined;
  /** Links in its session's locks (see `ManagedSession.register`). */
  prevLinked: SessionLock | undefined;
  nextLinked: SessionLock | undefined;

  constructor(
    name: string,
    grant: Grant,
    value: string | undefined,
    session: ManagedSession,
    localTurn: KeyTurn,
    host: LockHost,
    permit?: PermitRequest,
    warnHeldMs?: number,
  ) {
    this.name = name;
    this.token = grant.token;
    this.value = value;
    this.permit = permit !== undefined;
    this.#grant = grant;
    this.#session = session;
    this.#localTurn = localTurn;
    this.#host = host;
    this.lock =
      permit === undefined ? new Lock(this) : new Permit(this, permit.permits, permit.mode);
    this.#warnHeldMs = warnHeldMs;
    session.register(this);
    const thresholdMs = warnHeldMs ?? host.warnHeldMs;
    if (thresholdMs !== undefined && thresholdMs > 0) this.#warnWhenHeld(thresholdMs);
  }

  /**
   * Arms the `warnHeldMs` timer: one timer per lock, only while a threshold is set, on the
   * coordinator's clock; renewals leave it alone, and the lock's end cancels it.
   */
  #warnWhenHeld(thresholdMs: number): void {
    const clock = this.#host.clock;
    const grantedAt = clock.now();
    // One of core's bounds (one shared Node.js timer per delay): see docs/hot-path.md, "Core".
    this.#heldWarning = setBound(
      clock,
      () => {
        this.#heldWarning = undefined;
        if (this.ended.aborted) return;
        this.#host.events.emit("heldTooLong", {
          name: this.name,
          token: this.token,
          ownerId: this.#grant.ownerId,
          // A timer may fire a fraction of a millisecond early on the clock's reading.
          heldMs: Math.max(thresholdMs, clock.now() - grantedAt),
          thresholdMs,
          lock: this.lock,
        });
      },
      thresholdMs,
      false,
    );
  }

  /**
   * A write of a read-write lock becomes a read with the same token (see `Permit.downgrade`):
   * this lock ends as released before the store is asked, and the read is a new held lock on
   * the same session.
   */
  async downgrade(): Promise<Permit> {
    this.check();
    if (this.ended.aborted) throw this.ended.reason;
    const session = this.#session;
    const backendSession = session.backendSession;
    if (backendSession.downgrade === undefined) {
      throw new ConfigError("downgrade", "this backend's sessions cannot downgrade a write lock");
    }
    // Writes under the write lock stop before readers may start.
    this.ended.abort(releasedReason(this.name, this.token));
    let grant: Grant | null;
    try {
      grant = await boundedCall(backendSession.downgrade(this.#grant), {
        timeoutMs: session.ttlMs,
        what: "the downgrade",
        name: this.name,
      });
    } catch (error) {
      await this.release().catch(() => undefined);
      throw asUnavailable(error, `could not downgrade "${this.name}"; the write lock was released`);
    }
    if (grant === null || !session.isValid()) {
      this.#released(false, false);
      throw new LockLostError(this.name, this.token, "key-lost");
    }
    const read = new HeldLock(
      this.name,
      grant,
      this.value,
      session,
      NO_TURN,
      this.#host,
      { limit: 0, permits: 1, mode: "read" },
      this.#warnHeldMs,
    );
    this.#released(false, true);
    return read.lock as Permit;
  }

  deadline(): number {
    return this.#session.deadline;
  }

  get fencing(): Guarantees["fencing"] | undefined {
    return this.#host.fencing;
  }

  get ttlMs(): number {
    return this.#session.ttlMs;
  }

  /**
   * Renews the lock's session now, unless `ms` is given and at least that much is already
   * left; resolves with the milliseconds left. See `Lock.extend` for what it promises.
   */
  async extend(ms: number | undefined): Promise<number> {
    const session = this.#session;
    const clock = this.#host.clock;
    const longestMs = session.ttlMs - session.driftMs;
    if (ms !== undefined && (!Number.isInteger(ms) || ms < 1 || ms > longestMs)) {
      throw new ConfigError(
        "ms",
        `must be an integer between 1 and ${longestMs} (this lock's ${session.ttlMs} ms TTL less the ${session.driftMs} ms drift allowance), got ${String(ms)}: a renewal extends a lease by its TTL, no further. For a longer lease acquire with a larger ttlMs; the keepalive renews it for as long as the process lives`,
      );
    }
    this.check();
    if (this.ended.aborted) throw this.ended.reason;
    if (ms !== undefined && session.deadline - clock.now() >= ms) {
      return session.deadline - clock.now();
    }
    try {
      await session.renewNow();
    } catch (error) {
      this.check();
      if (this.ended.aborted) throw this.ended.reason;
      const leftMs = Math.max(0, Math.round(session.deadline - clock.now()));
      throw asUnavailable(
        error,
        `could not extend "${this.name}": the store did not confirm a renewal; ${leftMs} ms are left before its deadline, and the keepalive keeps trying`,
      );
    }
    this.check();
    if (this.ended.aborted) throw this.ended.reason;
    return session.deadline - clock.now();
  }

  now(): number {
    return this.#host.clock.now();
  }

  /**
   * Checks the local deadline now: past it, the session and its locks are lost on the spot,
   * with reason `deadline`, as the deadline timer would have done. Run by `held`,
   * `throwIfLost()` and the signal's `aborted`, `reason` and `throwIfAborted()`, so code that
   * resumes after a pause (SIGSTOP, a long GC) sees the loss at its first check, even when
   * its own overdue timers and I/O callbacks run before the deadline timer. A comparison with
   * the monotonic clock: no timer, no allocation.
   */
  check(): void {
    if (!this.ended.aborted) this.#session.isValid();
  }

  /** The session is gone or no longer holds the key: the name is free for a new grant here. */
  lose(reason: LockLostReason, cause?: unknown, detail?: string): void {
    this.markLost(reason, cause, detail);
    this.#localTurn.end();
  }

  /**
   * Ends the lock as lost for `reason`: its signal aborts and `lost` is emitted, once.
   * `detail`: the operator's reason of a forced release.
   */
  markLost(reason: LockLostReason, cause: unknown, detail?: string): void {
    if (this.ended.aborted) return;
    const error = new LockLostError(
      this.name,
      this.token,
      reason,
      detail === undefined ? { cause } : { cause, detail },
    );
    this.ended.abort(error);
    if (this.#heldWarning !== undefined) this.#stopWarning();
    this.#host.events.emit("lost", {
      name: this.name,
      token: this.token,
      reason,
      error,
      lock: this.lock,
    });
  }

  releaseOnClose(): Promise<boolean> {
    this.markLost("closed", undefined);
    return this.lock.release();
  }

  /**
   * Owner-checked release through the backend, bounded by one TTL; true when still ours:
   * whichever of the answer and the timeout comes first settles it.
   */
  release(): Promise<boolean> {
    const session = this.#session;
    if (!session.holds(this) || !session.isValid()) {
      this.#released(false, false);
      return Promise.resolve(false);
    }
    // The signal ends before the release is sent: once the store frees the key another
    // holder may start, and this one's work must already see that it no longer holds it.
    this.ended.abort(releasedReason(this.name, this.token));
    let call: Promise<boolean>;
    try {
      call = session.backendSession.release(this.#grant);
    } catch (error) {
      this.#released(true, false);
      return Promise.reject(this.#releaseError(error));
    }
    return new Promise<boolean>((resolve, reject) => {
      let settled = false;
      let retried = false;
      const timer = setBound(
        this.#host.clock,
        () => {
          if (settled) return;
          settled = true;
          this.#released(true, false);
          reject(
            new BackendUnavailableError(
              `the store did not answer a release of "${this.name}" within ${session.ttlMs} ms`,
            ),
          );
        },
        session.ttlMs,
        true,
      );
      const answered = (wasHeld: boolean) => {
        if (settled) return;
        settled = true;
        timer.cancel();
        this.#released(false, wasHeld);
        resolve(wasHeld);
      };
      const failed = (error: unknown) => {
        if (settled) return;
        if (!retried && isTransient(error)) {
          // A connection reset or refused on the way (an idle keep-alive socket the server
          // closed as the release reused it) is asked once more, within the same one-TTL
          // bound. The release is owner-checked, so a second attempt after a first that did
          // reach the store frees nothing of anyone else's; it answers false.
          retried = true;
          try {
            session.backendSession.release(this.#grant).then(answered, failed);
            return;
          } catch (again) {
            error = again;
          }
        }
        settled = true;
        timer.cancel();
        this.#released(true, false);
        reject(this.#releaseError(error));
      };
      // Whichever of the answer and the timeout comes first settles the release.
      call.then(answered, failed);
    });
  }

  #stopWarning(): void {
    this.#heldWarning?.cancel();
    this.#heldWarning = undefined;
  }

  #releaseError(error: unknown): unknown {
    return asUnavailable(
      error,
      `could not release "${this.name}"; it is no longer renewed and expires within ${this.#session.ttlMs} ms`,
    );
  }

  /**
   * After a release: untie the lock, end its signal (already ended when the release was
   * sent), free the name here, tell listeners.
   */
  #released(failed: boolean, wasHeld: boolean): void {
    const session = this.#session;
    const host = this.#host;
    session.unregister(this);
    // Usually ended already, when the release was sent: no second reason is built.
    if (!this.ended.aborted) this.ended.abort(releasedReason(this.name, this.token));
    if (this.#heldWarning !== undefined) this.#stopWarning();
    // After a failed release the session may still hold the key until it expires: keep the
    // name locked here until then, so this session never acquires it twice.
    const turn = this.#localTurn;
    if (failed) host.clock.setTimer(() => turn.end(), session.ttlMs + session.driftMs);
    else turn.end();
    if (host.events.listens("released")) {
      host.events.emit("released", {
        name: this.name,
        token: this.token,
        wasHeld,
        lock: this.lock,
      });
    }
  }
}

/**
 * The reason a released lock's signal carries. Built without running the Error constructor
 * (a release is no failure, and needs no stack). It is still a `LockLostError` (`instanceof`,
 * `constructor`, `code`, `reason` and `message` as usual): a plain constructor sharing
 * `LockLostError.prototype`.
 */
// Hot path: see docs/hot-path.md, "Core".
const ReleasedReason = function ReleasedReason(
  this: { -readonly [K in keyof LockLostError]: LockLostError[K] },
  name: string,
  token: bigint,
) {
  this.name = "LockLostError";
  this.code = "BATON_LOCK_LOST";
  this.message = `lock "${name}" (token ${token}) was released`;
  this.lockName = name;
  this.token = token;
  this.reason = "released";
} as unknown as { new (name: string, token: bigint): LockLostError; prototype: object };
ReleasedReason.prototype = LockLostError.prototype;

function releasedReason(name: string, token: bigint): LockLostError {
  return new ReleasedReason(name, token);
}
