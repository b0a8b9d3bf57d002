import type { Holder, LockBackend } from "./contract/backend.js";
import type { CoordinatorEventName, CoordinatorListener } from "./kernel/events.js";
import type { ForceReleaseRequest, ForceReleaseResult } from "./kernel/force-release.js";
import { Kernel } from "./kernel/kernel.js";
import type { Lock } from "./kernel/lock.js";
import {
  type AcquireOptions,
  type CoordinatorOptions,
  type Mode,
  type ResolvedOptions,
  resolveCoordinatorOptions,
  type TryAcquireOptions,
} from "./kernel/options.js";
import { type Election, type ElectionOptions, elect } from "./recipes/election.js";
import {
  forceRelease,
  type Inspection,
  type InspectOptions,
  inspect,
  type ListOptions,
  list,
} from "./recipes/inspection.js";
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
import { type LockContext, withLock } from "./recipes/with-lock.js";
import { liveCoordinators } from "./step-down.js";

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
  /**
   * What the store holds for `name` now, for operators: a lock or an election (its holder and
   * waiters), else a semaphore or read-write lock (its grants, waiters and permits), else a
   * job of `runOnce` or `schedule` (its latest slots' records and its running slot's holder);
   * `null` when the store has none of them. Rejects with `ConfigError` for a bad name, or
   * when the backend cannot list its keys (its guarantees do not declare `inspection`), and
   * with `BackendUnavailableError` when the store does not answer within one TTL.
   *
   * An election is told apart from a plain lock by a marker record its campaign writes once
   * on a backend that keeps records (`<name>` followed by a control character, which no name
   * can contain); without records an election shows as a lock.
   *
   * @example
   * const seen = await coordinator.inspect("invoices");
   * for (const holder of seen?.holders ?? []) {
   *   console.log(`${holder.ownerId} holds it, token ${holder.token}, ${holder.heldMs} ms`);
   * }
   */
  inspect(name: string, options?: InspectOptions): Promise<Inspection | null>;
  /**
   * Every lock, election, semaphore, read-write lock and job under `prefix` in the store,
   * for operators: plain locks and elections first, then semaphores and read-write locks,
   * then jobs (a slot's lock `<job>/slot/<slot>` is shown in its job). It reads the store a
   * page of keys at a time and the keys of a page a few at once, and stops after `limit`
   * items (default 1000); each read is bounded by one TTL. Options are checked at once
   * (`ConfigError`); the iteration rejects with `ConfigError` when the backend cannot list
   * its keys (its guarantees do not declare `inspection`). Only names with a holder or a
   * waiter are listed, and jobs with slot records among the first 10000 record keys under
   * the prefix or with a running slot; a name that changes while the list runs may be shown
   * as it was or as it is.
   *
   * @example
   * for await (const item of coordinator.list({ prefix: "billing/", limit: 100 })) {
   *   console.log(item.kind, item.name, item.holders.map((h) => h.ownerId).join(", "));
   * }
   */
  list(options?: ListOptions): AsyncIterable<Inspection>;
  /**
   * Takes a lock from its holder, for operators (a holder stuck in a deadlock, a process the
   * store still thinks alive): the store frees the grant at once, whoever holds it, so the
   * next waiter gets the lock with a greater token. The holder learns it at its next
   * renewal (within a third of its TTL): its lock's signal aborts with a `LockLostError`
   * whose `reason` is `"revoked"` and whose `detail` is `reason`. In correctness mode this
   * coordinator's fence (give the operator's coordinator the fence the holders write
   * through) is raised past the freed grant's token first, so the old holder's writes are
   * refused at once, before anyone else takes the lock; a fence that cannot be raised
   * rejects the call, and nothing is freed. `kind: "job"` frees the lock of a job's running
   * slot.
   *
   * Resolves with what happened: `released: false` when nothing held `name` or no grant with
   * `token` held it any more. Emits `forceReleased` and logs a warning naming the lock, the
   * token, the holder and the reason. Rejects with `ConfigError` for bad input (a missing
   * or blank `reason`, a bad `token` or `kind`; before any I/O), when the backend cannot
   * force-release (its guarantees do not declare `forceRelease`), or when a semaphore held by
   * several grants is named without a `token`. On a backend that declares
   * `forceRelease: "session"` the holder's whole session ends (result `scope`).
   *
   * @example
   * const result = await coordinator.forceRelease("invoices", {
   *   reason: "holder stuck on a dead database connection (INC-2231)",
   * });
   * if (result.released) console.log(`freed token ${result.token} of ${result.holder?.ownerId}`);
   */
  forceRelease(name: string, options: ForceReleaseRequest): Promise<ForceReleaseResult>;
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

/**
 * The coordinator: a facade over its kernel (the lock API, sessions, events, close) that
 * hands each recipe the kernel's {@link RecipeHost}.
 */
class CoordinatorImpl implements Coordinator {
  readonly ownerId: string;
  readonly mode: Mode;
  readonly ttlMs: number;
  readonly #kernel: Kernel;

  constructor(options: ResolvedOptions) {
    this.#kernel = new Kernel(options);
    this.ownerId = options.ownerId;
    this.mode = options.mode;
    this.ttlMs = options.ttlMs;
  }

  acquire(name: string, options?: AcquireOptions): Promise<Lock> {
    // Hot path: see docs/hot-path.md, "Core".
    return this.#kernel.acquire(name, options);
  }

  tryAcquire(name: string, options?: TryAcquireOptions): Promise<Lock | null> {
    return this.#kernel.tryAcquire(name, options);
  }

  withLock<T>(
    name: string,
    fn: (context: LockContext) => T | Promise<T>,
    options?: AcquireOptions,
  ): Promise<T> {
    return withLock(this.#kernel.host, name, fn, options);
  }

  holder(name: string): Promise<Holder | null> {
    return this.#kernel.holder(name);
  }

  watch(name: string, options?: { signal?: AbortSignal }): AsyncIterable<Holder | null> {
    return this.#kernel.watch(name, options);
  }

  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    return new SemaphoreHandle(this.#kernel.host, name, options);
  }

  readWriteLock(name: string): ReadWriteLock {
    return new ReadWriteLockHandle(this.#kernel.host, name);
  }

  elect(name: string, options: ElectionOptions): Election {
    return elect(this.#kernel.host, name, options);
  }

  partitions(name: string, options: PartitionOptions): Partitions {
    return partitions(this.#kernel.host, name, options);
  }

  runOnce<T>(
    job: string,
    slot: string,
    fn: (context: RunContext) => T | Promise<T>,
    options?: RunOnceOptions,
  ): Promise<RunOnceResult<T>> {
    return runOnce(this.#kernel.host, job, slot, fn, options);
  }

  schedule<T>(
    cron: string,
    job: string,
    fn: (context: RunContext) => T | Promise<T>,
    options?: ScheduleOptions<T>,
  ): Schedule {
    return schedule(this.#kernel.host, cron, job, fn, options);
  }

  inspect(name: string, options?: InspectOptions): Promise<Inspection | null> {
    return inspect(this.#kernel.host, name, options);
  }

  list(options?: ListOptions): AsyncIterable<Inspection> {
    return list(this.#kernel.host, options);
  }

  forceRelease(name: string, options: ForceReleaseRequest): Promise<ForceReleaseResult> {
    return forceRelease(this.#kernel.host, name, options);
  }

  on<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): () => void {
    return this.#kernel.events.on(event, listener);
  }

  once<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this {
    this.#kernel.events.once(event, listener);
    return this;
  }

  off<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): this {
    this.#kernel.events.off(event, listener);
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
    this.#kernel.events.addEventListener(type, listener, options);
  }

  removeEventListener(
    type: CoordinatorEventName,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
  ): void {
    this.#kernel.events.removeEventListener(type, listener);
  }

  dispatchEvent(_event: Event): boolean {
    throw new TypeError("a coordinator dispatches only its own events");
  }

  backend(): Promise<LockBackend> {
    return this.#kernel.backend();
  }

  close(): Promise<void> {
    liveCoordinators.delete(this);
    return this.#kernel.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
