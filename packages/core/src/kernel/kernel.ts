import type { Holder, LockBackend } from "../contract/backend.js";
import { type Clock, systemClock } from "../helpers/clock.js";
import { checkName, checkOptions, checkSignal } from "../helpers/validate.js";
import { AcquirePipeline, nullWhenHeld, rejectHeld } from "./acquire-pipeline.js";
import { BackendLoader } from "./backend-loader.js";
import { type CoordinatorEventHub, createEventHub } from "./events.js";
import {
  type ForceReleaseHost,
  type ForceReleaseRequest,
  type ForceReleaseResult,
  forceRelease,
} from "./force-release.js";
import { StoreInspection } from "./inspection.js";
import { Lifecycle } from "./lifecycle.js";
import type { Lock } from "./lock.js";
import { unreachableBoundMs } from "./managed-session.js";
import {
  type AcquireOptions,
  type Mode,
  type ResolvedAcquire,
  type ResolvedOptions,
  resolveAcquireOptions,
  type TryAcquireOptions,
} from "./options.js";
import type { Permit } from "./permit.js";
import type { LockClient, RecipeHost } from "./recipe-host.js";
import { PermitsRequest } from "./requests.js";
import { SessionPool } from "./session-pool.js";
import { StoreReads } from "./store-reads.js";

/**
 * A coordinator's engine: the lock API over one backend, and the host its recipes are given.
 * It is built from units that each own one thing: the backend (`BackendLoader`), the sessions
 * (`SessionPool`), acquiring (`AcquirePipeline`), reads of the store (`StoreReads`) and the
 * coordinator's life and ordered close (`Lifecycle`).
 */
export class Kernel implements LockClient {
  readonly ownerId: string;
  readonly mode: Mode;
  readonly ttlMs: number;
  readonly clock: Clock;
  readonly events: CoordinatorEventHub;
  /** What every recipe of this coordinator is given. */
  readonly host: RecipeHost;
  readonly #lifecycle: Lifecycle;
  readonly #backend: BackendLoader;
  readonly #sessions: SessionPool;
  readonly #pipeline: AcquirePipeline;
  readonly #reads: StoreReads;
  readonly #inspection: StoreInspection;
  readonly #forceRelease: ForceReleaseHost;

  constructor(options: ResolvedOptions) {
    this.ownerId = options.ownerId;
    this.mode = options.mode;
    this.ttlMs = options.ttlMs;
    const clock = options.clock ?? systemClock;
    this.clock = clock;
    const events = createEventHub(options.logger);
    this.events = events;
    const lifecycle = new Lifecycle(clock, events);
    this.#lifecycle = lifecycle;
    const backend = new BackendLoader(options);
    this.#backend = backend;
    const sessions = new SessionPool(options, clock, events, backend, lifecycle, (opened) =>
      this.#pipeline.backendOpening(opened),
    );
    this.#sessions = sessions;
    const fence = options.mode === "correctness" ? options.fence : undefined;
    this.#reads = new StoreReads(options.ttlMs, clock, events, sessions, backend, lifecycle);
    const reads = this.#reads;
    this.#pipeline = new AcquirePipeline(
      options.ttlMs,
      clock,
      events,
      sessions,
      lifecycle,
      fence,
      options.backend,
      options,
      (name) => reads.holder(name),
    );
    this.#inspection = new StoreInspection(options.ttlMs, clock, sessions, backend, lifecycle);
    this.#forceRelease = {
      ttlMs: options.ttlMs,
      clock,
      events,
      logger: options.logger,
      fence,
      sessions,
      backend,
      lifecycle,
    };
    this.host = this.#recipeHost();
  }

  /** The backend (loaded from the URL on first use). */
  backend(): Promise<LockBackend> {
    return this.#backend.get();
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
    return this.#pipeline.acquire(name, opts, rejectHeld);
  }

  async tryAcquire(name: string, options?: TryAcquireOptions): Promise<Lock | null> {
    checkName(name);
    return await this.#pipeline.acquire(name, resolveAcquireOptions(options, true), nullWhenHeld);
  }

  async holder(name: string): Promise<Holder | null> {
    checkName(name);
    return await this.#reads.holder(name);
  }

  async *watch(name: string, options?: { signal?: AbortSignal }): AsyncGenerator<Holder | null> {
    checkName(name);
    const o = checkOptions(options, "options", ["signal"]);
    const user = o.signal === undefined ? undefined : checkSignal(o.signal);
    yield* this.#reads.watch(name, user);
  }

  /** Frees a grant of `name` at the store, whoever holds it; see `Coordinator.forceRelease`. */
  forceRelease(name: string, request: ForceReleaseRequest): Promise<ForceReleaseResult> {
    return forceRelease(this.#forceRelease, name, request);
  }

  /**
   * Stops the recipes, then ends the calls, releases the locks, ends the sessions and closes
   * the backend, within one TTL (at least 5 s); see `Coordinator.close`.
   */
  close(): Promise<void> {
    const sessions = this.#sessions;
    const parts = {
      owedBackendClose: () => this.#backend.owedClose(),
      abortCalls: (error: unknown) => this.#pipeline.abortAll(error),
      settleOpenings: () => sessions.settleOpenings(),
      heldLocks: () => sessions.heldLocks(),
      closeSessions: () => sessions.closeAll(),
    };
    return this.#lifecycle.close(parts, unreachableBoundMs(this.ttlMs));
  }

  #recipeHost(): RecipeHost {
    const events = this.events;
    const lifecycle = this.#lifecycle;
    const backend = this.#backend;
    return {
      locks: this,
      clock: this.clock,
      events,
      report: (error, during) => events.emit("backgroundError", { error, during }),
      assertOpen: () => lifecycle.assertOpen(),
      track: (close) => lifecycle.track(close),
      knownGuarantees: () => backend.knownGuarantees(),
      backendKind: () => backend.kind(),
      acquirePermits: (name, options, request, orNull) =>
        this.#pipeline.acquire(
          name,
          options,
          orNull ? nullWhenHeld : rejectHeld,
          new PermitsRequest(request),
        ) as Promise<Permit | null>,
      permitHolders: (name) => this.#reads.permitHolders(name),
      records: (signal) => this.#reads.records(signal),
      inspection: (signal) => this.#inspection.access(signal),
      forceRelease: (name, request) => this.forceRelease(name, request),
    };
  }
}
