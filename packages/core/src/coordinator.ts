import type {
  BackendAcquireOptions,
  BackendPermitOptions,
  BackendSession,
  Grant,
  Holder,
  LockBackend,
  PermitMode,
} from "./contract/backend.js";
import type { BackendUrl } from "./contract/backend-url.js";
import {
  asUnavailable,
  BackendUnavailableError,
  ConfigError,
  CoordinatorClosedError,
  isAbortError,
  LockHeldError,
  SessionLostError,
  StaleTokenError,
} from "./contract/errors.js";
import type { Fence } from "./contract/fence.js";
import type { Guarantees } from "./contract/guarantees.js";
import { isTransient } from "./contract/transient.js";
import { type Abortable, AbortScope } from "./helpers/abort-scope.js";
import { type BackoffOptions, backoffMs } from "./helpers/backoff.js";
import { boundedCall, pausedWithin, pauseNote, raceAbortable } from "./helpers/bounded-call.js";
import { type Clock, sleep, systemClock, type Timer, type TimerOptions } from "./helpers/clock.js";
import { KeyedMutex } from "./helpers/keyed-mutex.js";
import { linkSignals } from "./helpers/link-signals.js";
import { LinkedList } from "./helpers/linked-list.js";
import { checkFunction, checkName, checkOptions, checkSignal } from "./helpers/validate.js";
import { AcquireCall } from "./kernel/acquire-call.js";
import type {
  CoordinatorEventName,
  CoordinatorEvents,
  CoordinatorListener,
} from "./kernel/events.js";
import { HandOffs } from "./kernel/hand-off.js";
import { HeldLock, type LockHost } from "./kernel/held-lock.js";
import { noPermitsError, noRecordsError } from "./kernel/kernel-errors.js";
import type { Lock } from "./kernel/lock.js";
import { ManagedSession, unreachableBoundMs } from "./kernel/managed-session.js";
import {
  type AcquireOptions,
  type CoordinatorOptions,
  checkCorrectness,
  type Mode,
  type ResolvedAcquire,
  type ResolvedOptions,
  resolveAcquireOptions,
  resolveCoordinatorOptions,
  type TryAcquireOptions,
} from "./kernel/options.js";
import type { Permit, PermitRequest } from "./kernel/permit.js";
import type { RecipeHost, RecordAccess } from "./kernel/recipe-host.js";
import { createBackend, knownGuarantees } from "./kernel/registry.js";
import { EventHub } from "./observability/event-hub.js";
import { safeLog } from "./observability/logger.js";
import { type Election, type ElectionOptions, elect } from "./recipes/election.js";
import { type PartitionOptions, type Partitions, partitions } from "./recipes/partitions.js";
import { type ReadWriteLock, ReadWriteLockHandle } from "./recipes/read-write-lock.js";
import {
  type RunContext,
  type RunOnceOptions,
  type RunOnceResult,
  runOnce,
} from "./recipes/run-once.js";
import { type Schedule, type ScheduleOptions, schedule } from "./recipes/schedule.js";
import { type Semaphore, SemaphoreHandle, type SemaphoreOptions } from "./recipes/semaphore.js";
import { type LockContext, runUnder } from "./recipes/with-lock.js";
import { liveCoordinators } from "./step-down.js";

export type { LockContext } from "./recipes/with-lock.js";

/** A backend session that keeps durable records. */
type RecordSession = BackendSession & Required<Pick<BackendSession, "readRecord" | "writeRecord">>;

/**
 * The user-facing API: locks over one backend, through one session and one keepalive loop
 * (and one more of each per other TTL that `acquire`'s `ttlMs` asks for).
 */
export interface Coordinator extends AsyncDisposable {
  /** Who holds this coordinator's locks. */
  readonly ownerId: string;
  /** `efficiency` or `correctness`. */
  readonly mode: Mode;
  /** Lease length asked for, in ms. */
  readonly ttlMs: number;
  /**
   * Acquires `name`, waiting up to `waitMs` (default 60 s) for a holder to let go.
   * Rejects with `LockTimeoutError` when the wait runs out, `LockHeldError` when `waitMs`
   * is 0 and the lock is held, `BackendUnavailableError` when the store cannot be reached,
   * `ConfigError` for bad input (before any I/O), `CoordinatorClosedError` after `close()`,
   * or the signal's reason when cancelled.
   *
   * A store it cannot reach does not hold the call for the whole wait: failures are retried
   * with backoff for one TTL (at least 5 s; an attempt under way then ends on its own bound),
   * then it rejects with `BackendUnavailableError` carrying the store's own error (which
   * names the host). Only errors known to be transient (see `isTransient`) are retried; any
   * other rejects the call at once. In correctness mode the fence raise after a grant has its
   * own bound of one TTL: a grant that comes within `waitMs` is raised and handed over even
   * when the wait runs out meanwhile.
   *
   * It never resolves with a lock that is already lost. A grant lost before it is handed over
   * (the process was paused past the lease while the fence was raised, or the store ended
   * the session) is not the caller's: acquire tries again, on a new session if need be,
   * within what is left of `waitMs`; when nothing is left it rejects with `LockTimeoutError`
   * (its `cause` is the `LockLostError`). With `waitMs: 0` it tries once more at once, then
   * rejects with the `LockLostError`.
   */
  acquire(name: string, options?: AcquireOptions): Promise<Lock>;
  /**
   * Tries once: the lock, or `null` when someone else holds it. Like `acquire`, it never
   * resolves with a lost lock: a grant lost before the hand-over gets one more try at once
   * (within one TTL of the call), then the call rejects with the `LockLostError`.
   */
  tryAcquire(name: string, options?: TryAcquireOptions): Promise<Lock | null>;
  /**
   * Runs `fn` under the lock and returns its result. The lock is released when `fn` settles;
   * `fn`'s own error wins over a release error. If the lock was lost while `fn` ran, rejects
   * with the `LockLostError` even when `fn` succeeded: its work was not exclusive.
   */
  withLock<T>(
    name: string,
    fn: (context: LockContext) => T | Promise<T>,
    options?: AcquireOptions,
  ): Promise<T>;
  /** The current holder of `name` as the store sees it, or `null`. */
  holder(name: string): Promise<Holder | null>;
  /**
   * A semaphore: at most `options.permits` permits of `name` held at once across every
   * process, each with a fencing token. No I/O until its first acquire. Throws a
   * `ConfigError` for bad input, or when the backend is known to have no semaphores (its
   * guarantees declare `semaphores: false`); see {@link Semaphore}.
   *
   * @example
   * const exports = coordinator.semaphore("exports", { permits: 3 });
   * await using permit = await exports.acquire();
   * await runExport({ token: permit.token, signal: permit.signal });
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore;
  /**
   * A read-write lock: many readers or one writer, writers never starved by readers, a write
   * downgradable to a read. No I/O until its first acquire; see {@link ReadWriteLock}.
   *
   * @example
   * const catalog = coordinator.readWriteLock("catalog");
   * await catalog.withWrite(({ token }) => updatePrices({ token }));
   */
  readWriteLock(name: string): ReadWriteLock;
  /**
   * The holder of `name` now and after every change, pushed from the store's watch where the
   * backend has one (polled every ttl/3 otherwise). Ends when `signal` aborts, the consumer
   * stops iterating, or the coordinator closes; store outages are retried.
   */
  watch(name: string, options?: { signal?: AbortSignal }): AsyncIterable<Holder | null>;
  /**
   * Campaigns for leadership of `name`: `onElected` runs once per term with a signal that
   * aborts when the term ends; `onRevoked` once when it ends. See {@link Election}.
   *
   * @example
   * const election = coordinator.elect("scheduler", {
   *   value: "10.0.0.7",
   *   onElected: ({ signal, term }) => runScheduler({ signal, fencingToken: term }),
   * });
   */
  elect(name: string, options: ElectionOptions): Election;
  /**
   * Owns a fair share of `count` partitions of `name` among the live instances (the
   * per-partition consumer): `onAssigned(partition, { signal, token })` runs once per
   * ownership; when an instance dies, the survivors take its partitions within a TTL and a
   * balancing round (ttl/3).
   */
  partitions(name: string, options: PartitionOptions): Partitions;
  /**
   * Runs `fn` for one slot of a job (tonight's billing run: job `"invoices"`, slot
   * `"2026-12-01"`) on exactly one replica, and records the outcome durably in the store,
   * beside the slot's lock: a slot that is done never runs again, even after every lock has
   * expired; a crashed or failed attempt is retried by the next replica that asks, up to
   * `maxAttempts`; an attempt past `atMostMs` has its signal aborted. Resolves with what
   * happened here: `ran`, `failed`, or skipped (`already-done`, `running-elsewhere`,
   * `attempts-exhausted`). Rejects with `ConfigError` for bad input or a backend that keeps no
   * records (Redlock), and with the store's errors before `fn` starts. The slot's lock is the
   * lock named `<job>/slot/<slot>` (`holder()` and `baton status` show who runs it); do not
   * take locks of that form yourself.
   *
   * @example
   * const result = await coordinator.runOnce("invoices", "2026-12-01", async ({ token, signal }) => {
   *   await billEveryClient({ fencingToken: token, signal });
   * });
   * if (result.outcome === "failed") console.error(result.error);
   */
  runOnce<T>(
    job: string,
    slot: string,
    fn: (context: RunContext) => T | Promise<T>,
    options?: RunOnceOptions,
  ): Promise<RunOnceResult<T>>;
  /**
   * Runs `fn` once per tick of `cron` (five or six fields, read in `options.timezone`, UTC by
   * default) across every replica that schedules the same job: each tick is a slot of
   * {@link Coordinator.runOnce}, named after the tick's instant in UTC (`2026-12-01T02:00:00Z`),
   * so replicas whose timers or clocks differ by seconds agree on it. Replicas that do not run
   * a slot wait while it runs and take it over if it crashes. Ticks missed while no replica
   * ran are skipped unless within `catchUpMs`. Stops with `stop()`, the signal, or `close()`.
   *
   * @example
   * const nightly = coordinator.schedule("0 2 * * *", "invoices", ({ token, signal }) =>
   *   billEveryClient({ fencingToken: token, signal }),
   * );
   */
  schedule<T>(
    cron: string,
    job: string,
    fn: (context: RunContext) => T | Promise<T>,
    options?: ScheduleOptions<T>,
  ): Schedule;
  /** Subscribes to an event; returns the unsubscribe function. */
  on<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): () => void;
  /**
   * Subscribes for the next event only, as `EventEmitter.once` does, so Node's
   * `events.once(coordinator, "acquired")` resolves with `[payload]` at the next grant.
   *
   * @example
   * import { once } from "node:events";
   * const [{ name, token }] = await once(coordinator, "acquired");
   */
  once<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this;
  /** Unsubscribes a listener added with `on` or `once`; harmless when it is not there. */
  off<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this;
  /** The same as {@link Coordinator.off} (the `EventEmitter` name). */
  removeListener<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this;
  /**
   * The `EventTarget` form of {@link Coordinator.on}: `listener` gets a `CustomEvent` whose
   * `detail` is the payload; `once` and `signal` are honoured.
   */
  addEventListener(
    type: CoordinatorEventName,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
    options?: Parameters<EventTarget["addEventListener"]>[2],
  ): void;
  /** Removes a listener added with {@link Coordinator.addEventListener}. */
  removeEventListener(
    type: CoordinatorEventName,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
  ): void;
  /** Throws: a coordinator dispatches only its own events. (Part of the `EventTarget` shape.) */
  dispatchEvent(event: Event): boolean;
  /** The backend (loaded from the URL on first use). */
  backend(): Promise<LockBackend>;
  /**
   * Releases every lock, ends the sessions and closes the backend: one made from `url`, or a
   * `backend` instance given to it unless `closeBackend: false` (a backend shared by several
   * coordinators is closed by the last of them). Settles within one TTL, at least 5 s,
   * whatever the store does: a step still unfinished then (a store that does not answer) is
   * reported as a `backgroundError` event and to the logger, and left to finish on its own.
   */
  close(): Promise<void>;
}

/**
 * Creates a coordinator. Options are checked before any I/O: a bad option throws
 * `ConfigError` naming the field.
 *
 * @example
 * const coordinator = createCoordinator({ url: "memory://", ttlMs: 5_000 });
 * const total = await coordinator.withLock("invoices", async ({ token, signal }) => {
 *   return await billEveryone({ token, signal });
 * });
 */
export function createCoordinator(options: CoordinatorOptions): Coordinator {
  const coordinator = new CoordinatorImpl(resolveCoordinatorOptions(options));
  liveCoordinators.add(coordinator);
  return coordinator;
}

/** TTLs, besides the coordinator's, that locks of one coordinator may use (a session each). */
const MAX_LOCK_TTLS = 8;
const RETRY: BackoffOptions = { minMs: 20, maxMs: 1_000 };
/** How long a given-up permit wait waits for its backend to take its queue entry out. */
const CLEANUP_GRACE_MS = 1_000;
const KEEP_ALIVE: TimerOptions = { keepAlive: true };
/** Where `close()` is, for the report of a close that did not finish in time. */
interface CloseProgress {
  step: string;
  closeBackend?: (() => Promise<void>) | undefined;
  backendClosing?: boolean;
}

/** Open coordinators by the backend instance they were given: the last to close closes it. */
const backendUsers = new WeakMap<LockBackend, number>();

class CoordinatorImpl implements Coordinator {
  readonly ownerId: string;
  readonly mode: Mode;
  readonly ttlMs: number;
  readonly #options: ResolvedOptions;
  readonly #clock: Clock;
  readonly #events: EventHub<CoordinatorEvents>;
  /** The fence every grant raises before the hand-over: correctness mode's, if it has one. */
  readonly #fence: Fence | undefined;
  readonly #local = new KeyedMutex();
  /** Hand-off windows for the waiters of a backend without a queue (set once one is open). */
  #handOffs: HandOffs | undefined;
  /** What every HeldLock of this coordinator shares. */
  readonly #host: LockHost;
  /** In-flight acquire calls, ended by close(). */
  readonly #calls = new LinkedList<AcquireCall>();
  /** In-flight holder calls and fence raises, ended by close(). */
  readonly #pending = new Set<AbortScope>();
  /** The closes of running recipes (elections, partitions, schedules), called first on close. */
  readonly #recipeCloses = new Set<() => Promise<void>>();
  /** What every recipe of this coordinator is given. */
  readonly #recipes: RecipeHost;
  #backend: Promise<LockBackend> | undefined;
  #session: ManagedSession | undefined;
  #opening: Promise<ManagedSession> | undefined;
  /** Sessions for locks acquired with a `ttlMs` other than the coordinator's, by TTL. */
  readonly #ttlSessions = new Map<number, ManagedSession>();
  readonly #ttlOpenings = new Map<number, Promise<ManagedSession>>();
  #closed = false;
  #closedPromise: Promise<void> | undefined;
  readonly #closing = new AbortController();

  constructor(options: ResolvedOptions) {
    this.#options = options;
    this.ownerId = options.ownerId;
    this.mode = options.mode;
    this.ttlMs = options.ttlMs;
    this.#clock = options.clock ?? systemClock;
    this.#events = new EventHub(options.logger);
    this.#fence = options.mode === "correctness" ? options.fence : undefined;
    const logger = options.logger;
    if (logger !== undefined) {
      // Every background failure reaches the logger too, listened to or not: an elect()-only
      // service whose campaign keeps failing (a bad URL option, an unreachable store) must
      // not fail in silence.
      this.#events.on("backgroundError", ({ error, during }) => {
        const detail = error instanceof Error ? error.message : String(error);
        safeLog(logger, "warn", `baton: ${during} failed: ${detail}`, error);
      });
      // A lost lock is logged once, as an error: the locks a session takes down together
      // (those lost in the same turn, for the same reason) on one line.
      const lost = new Map<string, CoordinatorEvents["lost"][]>();
      this.#events.on("lost", (event) => {
        if (event.reason === "closed") return;
        const batch = lost.get(event.reason);
        if (batch !== undefined) {
          batch.push(event);
          return;
        }
        lost.set(event.reason, [event]);
        queueMicrotask(() => {
          const events = lost.get(event.reason) ?? [];
          lost.delete(event.reason);
          safeLog(logger, "error", lostLine(events), event.error);
        });
      });
    }
    this.#host = {
      clock: this.#clock,
      events: this.#events,
      fencing: options.backend?.guarantees.fencing,
    };
    this.#recipes = this.#recipeHost();
    if (options.backend !== undefined) {
      this.#backend = Promise.resolve(options.backend);
      backendUsers.set(options.backend, (backendUsers.get(options.backend) ?? 0) + 1);
    }
  }

  on<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): () => void {
    return this.#events.on(event, listener);
  }

  once<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this {
    this.#events.once(event, listener);
    return this;
  }

  off<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this {
    this.#events.off(event, listener);
    return this;
  }

  removeListener<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this {
    return this.off(event, listener);
  }

  addEventListener(
    type: CoordinatorEventName,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
    options?: Parameters<EventTarget["addEventListener"]>[2],
  ): void {
    this.#events.addEventListener(type, listener, options);
  }

  removeEventListener(
    type: CoordinatorEventName,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
  ): void {
    this.#events.removeEventListener(type, listener);
  }

  dispatchEvent(_event: Event): boolean {
    throw new TypeError("a coordinator dispatches only its own events");
  }

  backend(): Promise<LockBackend> {
    this.#backend ??= this.#loadBackend();
    return this.#backend;
  }

  acquire(name: string, options?: AcquireOptions): Promise<Lock> {
    let opts: ResolvedAcquire;
    try {
      checkName(name);
      opts = resolveAcquireOptions(options, false);
    } catch (error) {
      return Promise.reject(error);
    }
    // Hot path: see docs/hot-path.md, "Core".
    return this.#acquire(name, opts, rejectHeld);
  }

  async tryAcquire(name: string, options?: TryAcquireOptions): Promise<Lock | null> {
    checkName(name);
    return await this.#acquire(name, resolveAcquireOptions(options, true), nullWhenHeld);
  }

  async withLock<T>(
    name: string,
    fn: (context: LockContext) => T | Promise<T>,
    options?: AcquireOptions,
  ): Promise<T> {
    checkName(name);
    checkFunction(fn, "fn");
    return await runUnder(await this.acquire(name, options), fn, this.#recipes.report);
  }

  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    return new SemaphoreHandle(this.#recipes, name, options);
  }

  readWriteLock(name: string): ReadWriteLock {
    return new ReadWriteLockHandle(this.#recipes, name);
  }

  /** What every recipe of this coordinator is given: see {@link RecipeHost}. */
  #recipeHost(): RecipeHost {
    const events = this.#events;
    const report = (error: unknown, during: string) =>
      events.emit("backgroundError", { error, during });
    return {
      locks: this,
      clock: this.#clock,
      events,
      report,
      assertOpen: () => this.#assertOpen(),
      track: (close) => {
        this.#recipeCloses.add(close);
        return () => {
          this.#recipeCloses.delete(close);
        };
      },
      knownGuarantees: () => this.#knownGuarantees(),
      backendKind: () => this.#backendKind(),
      acquirePermits: (name, options, request, orNull) =>
        this.#acquire(
          name,
          options,
          orNull ? nullWhenHeld : rejectHeld,
          request,
        ) as Promise<Permit | null>,
      permitHolders: (name) =>
        this.#bounded(`the permit holders of "${name}"`, (session) => {
          const read = session.permitHolders;
          if (read === undefined) throw noPermitsError(this.#backendKind());
          return read.call(session, name);
        }),
      records: (signal) => this.#records(signal),
    };
  }

  #backendKind(): string {
    return this.#options.backend?.kind ?? this.#options.url?.scheme ?? "?";
  }

  async holder(name: string): Promise<Holder | null> {
    checkName(name);
    return await this.#bounded(`the holder of "${name}"`, (session) => session.holder(name));
  }

  /**
   * A read of the store through the live session, bounded like every other call by one TTL;
   * `what` names it in the timeout error.
   */
  async #bounded<T>(what: string, read: (session: BackendSession) => Promise<T>): Promise<T> {
    this.#assertOpen();
    // Bounded like every other call: one TTL.
    const bound = new AbortScope();
    this.#pending.add(bound);
    const timer = this.#clock.setTimer(
      () => bound.abort(new Error("baton: budget ran out")),
      this.ttlMs,
    );
    try {
      const session = await this.#currentSession(bound);
      return await raceAbortable(read(session.backendSession), bound);
    } catch (error) {
      if (this.#closing.signal.aborted) throw closedError();
      if (bound.aborted) {
        throw new BackendUnavailableError(
          `the store did not answer a read of ${what} within ${this.ttlMs} ms`,
        );
      }
      if (error instanceof ConfigError) throw error;
      throw asUnavailable(error, `could not read ${what}`);
    } finally {
      timer.cancel();
      this.#pending.delete(bound);
    }
  }

  elect(name: string, options: ElectionOptions): Election {
    return elect(this.#recipes, name, options);
  }

  partitions(name: string, options: PartitionOptions): Partitions {
    return partitions(this.#recipes, name, options);
  }

  runOnce<T>(
    job: string,
    slot: string,
    fn: (context: RunContext) => T | Promise<T>,
    options?: RunOnceOptions,
  ): Promise<RunOnceResult<T>> {
    return runOnce(this.#recipes, job, slot, fn, options);
  }

  schedule<T>(
    cron: string,
    job: string,
    fn: (context: RunContext) => T | Promise<T>,
    options?: ScheduleOptions<T>,
  ): Schedule {
    return schedule(this.#recipes, cron, job, fn, options);
  }

  /** The store's durable records, through the live session, each call bounded by one TTL. */
  async #records(signal: AbortSignal | undefined): Promise<RecordAccess> {
    this.#assertOpen();
    await this.#recordSession(signal);
    const bound = { timeoutMs: this.ttlMs, signal: this.#closing.signal, what: "the job record" };
    // Each call goes through the session live at that moment: a run outlives the session it
    // started on when its holder was paused, and its outcome must still be written (or refused).
    return {
      read: async (key) => {
        const session = await this.#recordSession(signal);
        return boundedCall(session.readRecord(key), { ...bound, name: key });
      },
      write: async (key, value, expected) => {
        const session = await this.#recordSession(signal);
        return boundedCall(session.writeRecord(key, value, expected), { ...bound, name: key });
      },
    };
  }

  /** The live backend session, checked to keep records. */
  async #recordSession(signal: AbortSignal | undefined): Promise<RecordSession> {
    const backend = await this.backend();
    if (!backend.guarantees.records) throw noRecordsError(backend.kind);
    const session = (await this.#currentSession(signal)).backendSession;
    if (session.readRecord === undefined || session.writeRecord === undefined) {
      throw new ConfigError(
        "backend",
        `the ${backend.kind} backend declares records, but its session has no readRecord/writeRecord: the adapter is broken`,
      );
    }
    return session as RecordSession;
  }

  /** What the backend guarantees, when known without I/O (an instance, or an imported adapter). */
  #knownGuarantees(): Guarantees | undefined {
    const { backend, url } = this.#options;
    return backend?.guarantees ?? (url === undefined ? undefined : knownGuarantees(url));
  }

  async *watch(name: string, options?: { signal?: AbortSignal }): AsyncGenerator<Holder | null> {
    checkName(name);
    const o = checkOptions(options, "options", ["signal"]);
    const user = o.signal === undefined ? undefined : checkSignal(o.signal);
    this.#assertOpen();
    const linked = linkSignals([user, this.#closing.signal]);
    const signal = linked.signal;
    try {
      for (let failures = 0; !signal.aborted; ) {
        try {
          const session = await this.#currentSession(signal);
          const source = session.backendSession.watch
            ? session.backendSession.watch(name, signal)
            : this.#poll(session, name, signal);
          for await (const holder of source) {
            failures = 0;
            yield holder;
          }
          if (!signal.aborted) throw new BackendUnavailableError(`the watch of "${name}" ended`);
        } catch (error) {
          if (signal.aborted) break;
          this.#events.emit("backgroundError", { error, during: `watching "${name}"` });
          failures++;
          await sleep(this.#clock, backoffMs(failures, RETRY), signal).catch(() => undefined);
        }
      }
    } finally {
      linked.abort(new Error("baton: watch ended"));
    }
  }

  async *#poll(
    session: ManagedSession,
    name: string,
    signal: AbortSignal,
  ): AsyncGenerator<Holder | null> {
    let last: string | undefined;
    while (!signal.aborted && session.isValid()) {
      const holder = await raceAbortable(session.backendSession.holder(name), signal);
      const key = holder === null ? "" : `${holder.ownerId}\u0000${holder.token}`;
      if (key !== last) {
        last = key;
        yield holder;
      }
      await sleep(this.#clock, session.renewEveryMs, signal);
    }
  }

  close(): Promise<void> {
    if (this.#closed) return this.#closedPromise ?? Promise.resolve();
    this.#closed = true;
    liveCoordinators.delete(this);
    this.#closedPromise = this.#closeWithin(unreachableBoundMs(this.ttlMs));
    return this.#closedPromise;
  }

  /**
   * Runs the steps of `close()`, but settles after `boundMs` whatever the store does: the
   * step still running is reported, the backend's close is started if it is owed and was not
   * yet, and the rest finishes (or not) in the background.
   */
  #closeWithin(boundMs: number): Promise<void> {
    const progress: CloseProgress = { step: "stopping elections, partitions and schedules" };
    const steps = this.#closeSteps(progress);
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

  async #closeSteps(progress: CloseProgress): Promise<void> {
    progress.closeBackend = this.#owedBackendClose();
    // Elections first: they give up leadership and run their onRevoked before the locks go.
    await Promise.allSettled([...this.#recipeCloses].map((close) => close()));
    this.#closing.abort(closedError());
    for (const call of this.#calls.toArray()) call.scope.abort(closedError());
    for (const scope of this.#pending) scope.abort(closedError());
    progress.step = "opening a session";
    const opening = this.#opening;
    if (opening) await opening.catch(() => undefined);
    await Promise.allSettled(this.#ttlOpenings.values());
    // Each lock's signal aborts with reason `closed` before the release goes to the store.
    progress.step = "releasing locks";
    const sessions = [this.#session, ...this.#ttlSessions.values()];
    await Promise.allSettled(
      sessions.flatMap((session) => session?.locks() ?? []).map((held) => held.releaseOnClose()),
    );
    const session = this.#session;
    this.#session = undefined;
    const ttlSessions = [...this.#ttlSessions.values()];
    this.#ttlSessions.clear();
    try {
      progress.step = "closing the sessions";
      const closed = await Promise.allSettled([
        session?.close(),
        ...ttlSessions.map((s) => s.close()),
      ]);
      const failed = closed.find((c) => c.status === "rejected");
      if (failed !== undefined) throw failed.reason;
    } finally {
      if (progress.closeBackend !== undefined && !progress.backendClosing) {
        progress.step = "closing the backend";
        progress.backendClosing = true;
        await progress.closeBackend();
      }
    }
  }

  /**
   * The backend's close this coordinator owes: a backend made from its URL, or one it was
   * given (unless `closeBackend: false`) that no other open coordinator uses.
   */
  #owedBackendClose(): (() => Promise<void>) | undefined {
    const given = this.#options.backend;
    if (given !== undefined) {
      const users = (backendUsers.get(given) ?? 1) - 1;
      if (users > 0) backendUsers.set(given, users);
      else backendUsers.delete(given);
      if (users > 0 || !this.#options.closeBackend) return undefined;
      return () => given.close();
    }
    const loading = this.#backend;
    if (loading === undefined) return undefined;
    return async () => {
      const backend = await loading.catch(() => undefined);
      await backend?.close();
    };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #loadBackend(): Promise<LockBackend> {
    const url = this.#options.url as BackendUrl;
    const backend = await createBackend(url.href);
    if (this.mode === "correctness") checkCorrectness(backend.kind, backend.guarantees.fencing);
    return backend;
  }

  #assertOpen(): void {
    if (this.#closed) throw closedError();
  }

  /** The live session, opening one when there is none or the last one was lost. */
  async #currentSession(signal: Abortable | undefined): Promise<ManagedSession> {
    const current = this.#session;
    if (current?.isValid()) return current;
    this.#opening ??= this.#openSession().finally(() => {
      this.#opening = undefined;
    });
    return await raceAbortable(this.#opening, signal);
  }

  /** The live session for locks of `ttlMs` (undefined: the coordinator's), if there is one. */
  #liveSession(ttlMs: number | undefined): ManagedSession | undefined {
    const session =
      ttlMs === undefined || ttlMs === this.ttlMs ? this.#session : this.#ttlSessions.get(ttlMs);
    return session?.isValid() ? session : undefined;
  }

  /**
   * The session for locks of `ttlMs`, opening one when there is none or the last one was
   * lost: stores lease per session, so each TTL in use has a session (and a keepalive) of
   * its own.
   */
  async #sessionFor(
    ttlMs: number | undefined,
    signal: Abortable | undefined,
  ): Promise<ManagedSession> {
    if (ttlMs === undefined || ttlMs === this.ttlMs) return await this.#currentSession(signal);
    const live = this.#liveSession(ttlMs);
    if (live !== undefined) return live;
    let opening = this.#ttlOpenings.get(ttlMs);
    if (opening === undefined) {
      if (!this.#ttlSessions.has(ttlMs) && this.#ttlSessions.size >= MAX_LOCK_TTLS) {
        throw new ConfigError(
          "ttlMs",
          `this coordinator already keeps sessions for ${MAX_LOCK_TTLS} TTLs besides its own ${this.ttlMs} ms (${[...this.#ttlSessions.keys()].join(", ")} ms), and each TTL is a session of its own with the store: use a few fixed TTLs, or another coordinator`,
        );
      }
      opening = this.#openSession(ttlMs).finally(() => {
        this.#ttlOpenings.delete(ttlMs);
      });
      this.#ttlOpenings.set(ttlMs, opening);
    }
    return await raceAbortable(opening, signal);
  }

  async #openSession(ttlMs = this.ttlMs): Promise<ManagedSession> {
    const backend = await this.backend();
    this.#host.fencing = backend.guarantees.fencing;
    if (!backend.guarantees.fifo) this.#handOffs ??= new HandOffs(this.#clock);
    let session: ManagedSession;
    try {
      session = await ManagedSession.open(backend, ttlMs, this.ownerId, {
        clock: this.#clock,
        renewEveryMs: this.#options.renewEveryMs,
        events: this.#events,
        logger: this.#options.logger,
      });
    } catch (error) {
      throw asUnavailable(error, `could not open a ${backend.kind} session`);
    }
    if (this.#closed) {
      await session.close();
      throw closedError();
    }
    if (ttlMs === this.ttlMs) this.#session = session;
    else this.#ttlSessions.set(ttlMs, session);
    if (session.ttlMs !== ttlMs) {
      safeLog(
        this.#options.logger,
        "warn",
        `baton: the ${backend.kind} server granted a ${session.ttlMs} ms session instead of the ${ttlMs} ms asked for; deadlines use ${session.ttlMs} ms`,
      );
    }
    this.#events.emit("sessionOpened", { ownerId: this.ownerId, ttlMs: session.ttlMs });
    return session;
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
  #acquire<H>(
    name: string,
    opts: ResolvedAcquire,
    whenHeld: WhenHeld<H>,
    permit?: PermitRequest,
  ): Promise<Lock | H> {
    let call: AcquireCall;
    try {
      this.#assertOpen();
      call = new AcquireCall(name, opts, this.ttlMs, this.#clock, permit, this.#handOffs);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#calls.add(call);
    // Hot path: see docs/hot-path.md, "Core".
    try {
      if (permit !== undefined) {
        // Permits of one name are held many at once: no in-process queue.
        call.unlockLocal = noop;
        if (!call.scope.aborted && this.#fenceFor(call) === undefined) {
          const session = this.#liveSession(opts.ttlMs);
          if (session !== undefined) return this.#firstAttempt(call, session, whenHeld);
        }
      } else if (!call.scope.aborted && (call.waiting || !this.#local.isLocked(name))) {
        call.unlockLocal = this.#local.tryLock(name);
        if (call.unlockLocal !== undefined && this.#fence === undefined && call.holdOffMs === 0) {
          const session = this.#liveSession(opts.ttlMs);
          if (session !== undefined) return this.#firstAttempt(call, session, whenHeld);
        }
      }
    } catch (error) {
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
      pending = sendAcquire(backendSession, call);
      if (call.permit !== undefined && call.waiting) call.inFlight = pending;
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
            resolve(
              grant === null
                ? whenHeld(call.name)
                : this.#handOver(call, this.#hold(call, grant, session)),
            );
          } catch (error) {
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
        if (call.unlockLocal === undefined) {
          if (!call.waiting && this.#local.isLocked(name)) return whenHeld(name);
          call.unlockLocal = await this.#waitLocal(call);
        }
        if (call.holdOffMs > 0) await this.#holdOff(call);
      } else if (failed !== undefined) {
        await this.#afterAcquireFailed(call, from - 1, failed.error, failed.session);
      }
      for (let attempt = from; ; attempt++) {
        this.#assertOpen();
        const session = this.#liveSession(opts.ttlMs) ?? (await this.#openFor(call, attempt));
        if (session === undefined) continue;
        let grant: Grant | null;
        try {
          grant = await this.#backendAcquire(session, call);
        } catch (error) {
          await this.#afterAcquireFailed(call, attempt, error, session);
          continue;
        }
        if (grant === null) return whenHeld(name);
        if (!session.isValid()) continue; // the session died under us: that grant is void
        const held = this.#hold(call, grant, session);
        // Without a fence the grant is handed over as it is: the session was checked just now.
        const fence = this.#fenceFor(call);
        if (fence === undefined) return this.#handOver(call, held);
        await this.#raiseFence(fence, held, call);
        if (held.lock.held) return this.#handOver(call, held);
        await this.#afterLostGrant(call, held, attempt);
      }
    } finally {
      this.#endCall(call);
    }
  }

  /** The call is over: its name is freed here (unless a held lock took it over), its bounds end. */
  #endCall(call: AcquireCall): void {
    call.unlockLocal?.();
    call.end();
    this.#calls.delete(call);
  }

  /** Waits in this process's queue for the name (FIFO), for as long as the call may wait. */
  async #waitLocal(call: AcquireCall): Promise<() => void> {
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
      const session = await this.#sessionFor(call.options.ttlMs, call.scope);
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
      throw this.#cutShort(call, () =>
        call.waiting ? call.timeout() : call.noAnswer("acquiring"),
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
      await sleep(this.#clock, backoffMs(attempt, RETRY), call.scope.signal);
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
    if (this.#closing.signal.aborted) return closedError();
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
    const unlockLocal = call.endsHere(call.unlockLocal ?? noop);
    call.unlockLocal = undefined;
    return new HeldLock(
      call.name,
      grant,
      call.options.value,
      session,
      unlockLocal,
      this.#host,
      call.permit,
    );
  }

  /** The lock goes to the caller. */
  #handOver(call: AcquireCall, held: HeldLock): Lock {
    if (this.#events.listens("acquired")) {
      this.#events.emit("acquired", {
        name: held.name,
        token: held.token,
        waitedMs: this.#clock.now() - call.started,
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
    call.unlockLocal =
      call.permit !== undefined
        ? noop
        : (this.#local.tryLock(call.name) ?? (await this.#waitLocal(call)));
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
   * The fence a grant of `call` raises: the coordinator's (correctness mode) for a lock or a
   * write; none for a semaphore's permits and reads, which are held many at once and share
   * their order with the writes.
   */
  #fenceFor(call: AcquireCall): Fence | undefined {
    const permit = call.permit;
    return permit === undefined || permit.mode === "write" ? this.#fence : undefined;
  }

  /**
   * The backend's acquire, bounded by `signal` even if the backend ignores it. A grant that
   * arrives after we gave up is released in the background, so nothing is left behind.
   */
  #backendAcquire(session: ManagedSession, call: AcquireCall): Promise<Grant | null> {
    const { name, scope } = call;
    const backendSession = session.backendSession;
    const pending = sendAcquire(backendSession, call);
    if (call.permit !== undefined && call.waiting) call.inFlight = pending;
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
    this.#pending.add(raise);
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
      this.#pending.delete(raise);
    }
  }
}

/**
 * A backend's acquire options whose `signal` is built only when the backend reads it: a class
 * with a prototype getter, not an object literal with a getter.
 */
class ScopedAcquireOptions implements BackendAcquireOptions {
  // Hot path: see docs/hot-path.md, "Core".
  readonly wait: boolean;
  readonly value: string | undefined;
  readonly #scope: AbortScope;

  constructor(wait: boolean, value: string | undefined, scope: AbortScope) {
    this.wait = wait;
    this.value = value;
    this.#scope = scope;
  }

  get signal(): AbortSignal {
    return this.#scope.signal;
  }
}

/**
 * A backend's permit options: a lock's, with the key's limit, the grant's share and its
 * token rule.
 */
class ScopedPermitOptions extends ScopedAcquireOptions implements BackendPermitOptions {
  readonly limit: number;
  readonly permits: number;
  readonly mode: PermitMode;

  constructor(wait: boolean, value: string | undefined, scope: AbortScope, permit: PermitRequest) {
    super(wait, value, scope);
    this.limit = permit.limit;
    this.permits = permit.permits;
    this.mode = permit.mode;
  }
}

/** The backend call of one attempt of `call`: `acquire`, or `acquirePermits` for permits. */
function sendAcquire(session: BackendSession, call: AcquireCall): Promise<Grant | null> {
  const permit = call.permit;
  if (permit === undefined) {
    return session.acquire(
      call.name,
      new ScopedAcquireOptions(call.waiting, call.options.value, call.scope),
    );
  }
  if (session.acquirePermits === undefined) throw noPermitsError();
  return session.acquirePermits(
    call.name,
    new ScopedPermitOptions(call.waiting, call.options.value, call.scope, permit),
  );
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

function noop(): void {}

/**
 * How an acquire that finds the lock held and may not wait ends: with what this returns, or
 * with what it throws. A held lock is the usual answer of a try, so it is no exception there:
 * throwing one costs more than the whole try on a local store.
 */
type WhenHeld<H> = (name: string) => H;

const rejectHeld: WhenHeld<never> = (name) => {
  throw new LockHeldError(name);
};

const nullWhenHeld: WhenHeld<null> = () => null;

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

function closedError(): CoordinatorClosedError {
  return new CoordinatorClosedError();
}
