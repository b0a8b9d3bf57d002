import type { BackendSession, LockBackend, RevokedGrant } from "../contract/backend.js";
import {
  BackendUnavailableError,
  type LockLostReason,
  SessionLostError,
} from "../contract/errors.js";
import { pausedWithin, pauseNote } from "../helpers/bounded-call.js";
import type { Clock, Timer } from "../helpers/clock.js";
import { type Linked, LinkedList } from "../helpers/linked-list.js";
import type { Logger } from "../observability/logger.js";
import { safeLog } from "../observability/logger.js";
import type { CoordinatorEventHub } from "./events.js";

/**
 * A lock registered with a session, told when it can no longer be trusted. The session keeps
 * its locks in a list linked through the locks themselves (see `LinkedList`).
 */
export interface SessionLock extends Linked<SessionLock> {
  /** The lock name (the backend key). */
  readonly name: string;
  /** The grant's fencing token: a forced release names the grant it revoked by it. */
  readonly token: bigint;
  /**
   * True for a semaphore's permit or a read-write lock's hold, whose key is in the permit key
   * space: `lostKeys` names plain locks only.
   */
  readonly permit: boolean;
  /**
   * Called at most once, for any loss but a release. `detail`: the operator's reason of a
   * forced release (reason `revoked`).
   */
  lose(reason: LockLostReason, cause?: unknown, detail?: string): void;
  /**
   * The coordinator is closing: the lock ends as lost (reason `closed`), then is released at
   * the store. Resolves as the lock's `release()` does.
   */
  releaseOnClose(): Promise<boolean>;
}

/** Timing and reporting shared by every session of a coordinator. */
export interface SessionSettings {
  readonly clock: Clock;
  /** Renewal interval asked for; clamped to a third of the TTL the store granted. */
  readonly renewEveryMs: number | undefined;
  readonly events: CoordinatorEventHub;
  readonly logger: Logger | undefined;
}

/**
 * While renewals keep failing, the first failure is logged, then one summary line at most
 * this often (a short outage retries every few ms to a few hundred ms), then the recovery.
 */
export const RENEWAL_SUMMARY_MS = 5_000;

/** Shortest bound on opening a session. */
const OPEN_BOUND_MIN_MS = 5_000;

/**
 * How long an acquire keeps trying a store it cannot reach before it rejects with
 * `BackendUnavailableError`, and the bound on opening one session: one TTL, at least 5 s.
 */
export function unreachableBoundMs(ttlMs: number): number {
  return Math.max(ttlMs, OPEN_BOUND_MIN_MS);
}

/** Default drift allowance: 1% of the TTL plus 2 ms (the Redlock paper's figure). */
export function defaultDriftMs(ttlMs: number): number {
  return Math.ceil(ttlMs * 0.01) + 2;
}

/**
 * A backend session under core's care: one keepalive loop (never two renewals at once), a
 * local deadline on the monotonic clock (start of the last confirmed renewal + ttl - drift),
 * and the locks that live and die with it.
 */
export class ManagedSession {
  /** The adapter's session. */
  readonly backendSession: BackendSession;
  /** TTL the store granted. */
  readonly ttlMs: number;
  /** Interval between renewals. */
  readonly renewEveryMs: number;
  /** Safety margin taken off every deadline. */
  readonly driftMs: number;
  readonly #settings: SessionSettings;
  /** Its locks, newest first. Hot path: see docs/hot-path.md, "Core". */
  readonly #locks = new LinkedList<SessionLock>();
  #deadline: number;
  #dead = false;
  #renewTimer: Timer | undefined;
  #deadlineTimer: Timer | undefined;
  #unsubscribeLost: (() => void) | undefined;
  /** The renewal in flight, if any (true once confirmed). */
  #renewing: Promise<boolean> | undefined;
  /** Why the last renewal that failed did. */
  #renewError: unknown;
  /** ` (the postgres store at db1:5432)` for log lines, or nothing when the backend has no endpoint. */
  readonly #where: string;
  /** Renewals failed in a row, and those not logged yet; when the streak and the last line began. */
  #failures = 0;
  #unlogged = 0;
  #streakStart = 0;
  #loggedAt = 0;

  /** Opens a backend session and starts keeping it alive. */
  static async open(
    backend: LockBackend,
    ttlMs: number,
    ownerId: string,
    settings: SessionSettings,
  ): Promise<ManagedSession> {
    const clock = settings.clock;
    const started = clock.now();
    // An open that never answers must not hang every later acquire: bound it.
    const boundMs = unreachableBoundMs(ttlMs);
    const controller = new AbortController();
    const timer = clock.setTimer(() => {
      const paused = pauseNote(pausedWithin(started, boundMs, clock.now()));
      controller.abort(
        new BackendUnavailableError(
          `the ${backend.kind} store${endpointNote(backend)} did not open a session within ${boundMs} ms${paused}`,
        ),
      );
    }, boundMs);
    const opening = backend.openSession({ ttlMs, ownerId, signal: controller.signal });
    try {
      const session = await new Promise<BackendSession>((resolve, reject) => {
        controller.signal.addEventListener("abort", () => reject(controller.signal.reason), {
          once: true,
        });
        opening.then(resolve, reject);
      });
      const where = backend.endpoint ? ` (the ${backend.kind} store${endpointNote(backend)})` : "";
      return new ManagedSession(session, started, settings, where);
    } catch (error) {
      // A session that opens after we gave up is closed, not leaked.
      opening.then((late) => late.close()).catch(() => undefined);
      throw error;
    } finally {
      timer.cancel();
    }
  }

  private constructor(
    session: BackendSession,
    started: number,
    settings: SessionSettings,
    where: string,
  ) {
    this.backendSession = session;
    this.#settings = settings;
    this.#where = where;
    this.ttlMs = session.ttlMs;
    this.driftMs = defaultDriftMs(this.ttlMs);
    const third = Math.max(1, Math.floor(this.ttlMs / 3));
    this.renewEveryMs = Math.min(settings.renewEveryMs ?? third, third);
    this.#deadline = started + this.ttlMs - this.driftMs;
    const lost = session.lost;
    if (lost !== undefined) {
      const onLost = () => this.lose("session-lost", lost.reason);
      if (lost.aborted) queueMicrotask(onLost);
      else {
        lost.addEventListener("abort", onLost, { once: true });
        this.#unsubscribeLost = () => lost.removeEventListener("abort", onLost);
      }
    }
    // The interval runs from the start of the open, as the deadline does: a session whose open
    // took most of the TTL (a busy machine, a slow store) is renewed at once, not an interval
    // after it opened, when its deadline may have passed.
    this.#scheduleRenew(Math.max(0, started + this.renewEveryMs - settings.clock.now()));
    this.#scheduleDeadline();
  }

  /** Monotonic time after which nothing held through this session is trusted. */
  get deadline(): number {
    return this.#deadline;
  }

  /** True while the session is alive and its deadline has not passed. */
  isValid(): boolean {
    if (this.#dead) return false;
    if (this.#settings.clock.now() < this.#deadline) return true;
    this.lose(
      "deadline",
      new SessionLostError("no renewal was confirmed before the local deadline"),
    );
    return false;
  }

  /** How many locks live on this session. */
  get lockCount(): number {
    return this.#locks.size;
  }

  /** The locks tied to this session now, newest first. */
  locks(): SessionLock[] {
    return this.#locks.toArray();
  }

  /** Ties `lock` to this session. */
  register(lock: SessionLock): void {
    this.#locks.add(lock);
  }

  /** Unties `lock` (after release). True when it was still tied. */
  unregister(lock: SessionLock): boolean {
    return this.#locks.delete(lock);
  }

  /** True when `lock` is still tied to this live session. */
  holds(lock: SessionLock): boolean {
    return !this.#dead && this.#locks.has(lock);
  }

  /**
   * Ends the session for `reason`: every lock is told, the backend session is closed in the
   * background (its failure becomes a `backgroundError` event). Idempotent.
   */
  lose(reason: LockLostReason, cause: unknown): void {
    if (this.#dead) return;
    this.#stop();
    const locks = this.#takeLocks();
    for (const lock of locks) lock.lose(reason, cause);
    if (reason !== "closed") this.#settings.events.emit("sessionLost", { error: cause });
    this.backendSession.close().catch((error: unknown) => {
      this.#settings.events.emit("backgroundError", { error, during: "closing a lost session" });
    });
  }

  /** Closes the session: its locks are lost with reason `closed`. */
  async close(): Promise<void> {
    if (this.#dead) return;
    this.#stop();
    const locks = this.#takeLocks();
    for (const lock of locks) lock.lose("closed");
    await this.backendSession.close();
  }

  /** The locks, oldest first (the order they were registered in). */
  #oldestFirst(): SessionLock[] {
    return this.#locks.toArray().reverse();
  }

  /** Unties every lock and returns them, oldest first. */
  #takeLocks(): SessionLock[] {
    const locks = this.#oldestFirst();
    for (const lock of locks) this.#locks.delete(lock);
    return locks;
  }

  #stop(): void {
    this.#dead = true;
    this.#renewTimer?.cancel();
    this.#deadlineTimer?.cancel();
    this.#unsubscribeLost?.();
  }

  /**
   * Renews now, after any renewal already in flight, instead of at the next interval (a
   * lock's `extend()`); the interval then runs from this renewal. Resolves once the store
   * confirmed it; rejects with why it did not (`SessionLostError` when the session is gone).
   * The keepalive loop goes on either way.
   */
  async renewNow(): Promise<void> {
    while (this.#renewing !== undefined) await this.#renewing;
    if (this.#dead) throw new SessionLostError("the session has ended");
    this.#renewTimer?.cancel();
    if (!(await this.#startRenew())) throw this.#renewError;
  }

  #scheduleRenew(delayMs: number): void {
    this.#renewTimer = this.#settings.clock.setTimer(() => {
      void this.#startRenew();
    }, delayMs);
  }

  /** Starts a renewal, tracked so that `renewNow()` never runs two at once. */
  #startRenew(): Promise<boolean> {
    const renewing = this.#renew().finally(() => {
      if (this.#renewing === renewing) this.#renewing = undefined;
    });
    this.#renewing = renewing;
    return renewing;
  }

  /** One renewal: true when the store confirmed it; otherwise false, with `#renewError` set. */
  async #renew(): Promise<boolean> {
    // After a pause (SIGSTOP, a long GC) the renewal timer can run before the deadline timer.
    // Past the deadline the locks were untrusted during the pause: isValid() loses them for
    // that reason, and no renewal that happened to succeed makes them trusted again.
    if (!this.isValid()) return this.#renewFailed(new SessionLostError("the session has ended"));
    const clock = this.#settings.clock;
    const started = clock.now();
    try {
      // Never two renewals in flight: the next one starts only after this one settled. The
      // contract asks backends to bound keepAlive(); the deadline fires regardless.
      const result = await this.backendSession.keepAlive();
      if (this.#dead) return this.#renewFailed(new SessionLostError("the session has ended"));
      this.#confirm(started);
      this.#renewedAgain();
      const revoked = result?.revoked;
      if (revoked !== undefined && revoked.length > 0) this.#revoke(revoked);
      const lostKeys = result?.lostKeys;
      if (lostKeys !== undefined && lostKeys.length > 0) {
        const byName = new Map(
          this.#oldestFirst()
            .filter((lock) => !lock.permit)
            .map((lock) => [lock.name, lock]),
        );
        for (const key of lostKeys) {
          const lock = byName.get(key);
          if (lock === undefined || !this.#locks.delete(lock)) continue;
          lock.lose("key-lost");
        }
      }
      this.#settings.events.emit("renewed", {
        durationMs: clock.now() - started,
        locks: this.#locks.size,
      });
      // The interval runs from the start of this renewal, so a slow store costs no margin.
      this.#scheduleRenew(Math.max(0, started + this.renewEveryMs - clock.now()));
      return true;
    } catch (error) {
      if (this.#dead) return this.#renewFailed(error);
      if (error instanceof SessionLostError) {
        this.lose("session-lost", error);
        return this.#renewFailed(error);
      }
      const remainingMs = Math.max(0, this.#deadline - clock.now());
      this.#settings.events.emit("renewFailed", {
        error,
        remainingMs,
        names: this.#oldestFirst().map((lock) => lock.name),
      });
      this.#logFailure(error, remainingMs);
      // Retry sooner than the normal interval, so a short outage costs no lock.
      this.#scheduleRenew(Math.max(5, Math.min(this.renewEveryMs / 2, remainingMs / 3)));
      return this.#renewFailed(error);
    }
  }

  /**
   * Ends the grants an operator force-released (see `BackendSession.forceRelease`): each lock
   * (or permit grant) named, by key space, name and token, is lost with reason `revoked` and
   * the operator's reason as its error's `detail`. The session and its other locks live on.
   */
  #revoke(revoked: readonly RevokedGrant[]): void {
    const locks = this.#oldestFirst();
    for (const grant of revoked) {
      const permit = grant.space === "permit";
      const lock = locks.find(
        (l) => l.name === grant.key && l.permit === permit && l.token === grant.token,
      );
      if (lock === undefined || !this.#locks.delete(lock)) continue;
      lock.lose("revoked", undefined, grant.reason);
    }
  }

  /**
   * Logs a failed renewal: the first of a streak, then one summary at most every
   * {@link RENEWAL_SUMMARY_MS} with the count since the last line.
   */
  #logFailure(error: unknown, remainingMs: number): void {
    const now = this.#settings.clock.now();
    const left = `${Math.round(remainingMs)} ms left before the local deadline`;
    this.#failures++;
    if (this.#failures === 1) {
      this.#streakStart = now;
      this.#loggedAt = now;
      safeLog(this.#settings.logger, "warn", `baton: renewal failed${this.#where}, ${left}`, error);
      return;
    }
    this.#unlogged++;
    const sinceMs = now - this.#loggedAt;
    if (sinceMs < RENEWAL_SUMMARY_MS) return;
    safeLog(
      this.#settings.logger,
      "warn",
      `baton: renewal failed${this.#where} ${this.#unlogged} more times in the last ${Math.round(sinceMs)} ms (${this.#failures} in a row), ${left}`,
      error,
    );
    this.#unlogged = 0;
    this.#loggedAt = now;
  }

  /** After a confirmed renewal: logs the end of a failure streak, if there was one. */
  #renewedAgain(): void {
    if (this.#failures === 0) return;
    const ms = Math.round(this.#settings.clock.now() - this.#streakStart);
    safeLog(
      this.#settings.logger,
      "warn",
      `baton: renewal succeeded again${this.#where} after ${this.#failures} failed in a row over ${ms} ms`,
    );
    this.#failures = 0;
    this.#unlogged = 0;
  }

  #renewFailed(error: unknown): false {
    this.#renewError = error;
    return false;
  }

  #confirm(started: number): void {
    const next = started + this.ttlMs - this.driftMs;
    if (next > this.#deadline) this.#deadline = next;
    this.#scheduleDeadline();
  }

  #scheduleDeadline(): void {
    this.#deadlineTimer?.cancel();
    const clock = this.#settings.clock;
    this.#deadlineTimer = clock.setTimer(() => {
      // Past the deadline, isValid() loses everything; before it (a renewal moved it), re-arm.
      if (this.isValid()) this.#scheduleDeadline();
    }, this.#deadline - clock.now());
  }
}

/** ` at db1:5432` when the backend says where it connects (see `LockBackend.endpoint`). */
function endpointNote(backend: LockBackend): string {
  return backend.endpoint ? ` at ${backend.endpoint}` : "";
}
