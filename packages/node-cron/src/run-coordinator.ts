import {
  ConfigError,
  type Coordinator,
  LIMITS,
  type RunContext,
  type RunOnceResult,
} from "@baton/core";
import type { CronTaskContext, RunCoordinatorLike } from "./node-cron-shapes.js";

/** Options of {@link batonRunCoordinator}. */
export interface BatonRunCoordinatorOptions {
  /**
   * The longest a fire may run, ms (default {@link DEFAULT_AT_MOST_MS}, one hour). Past it
   * the run's signal aborts with a `RunTimeoutError`, the fire is recorded failed and its lock
   * released, so a replica that waits may run it again; node-cron does not stop the task.
   */
  readonly atMostMs?: number;
  /** Attempts a fire gets in all, crashed ones included (default 3), as in `runOnce`. */
  readonly maxAttempts?: number;
  /**
   * How long a replica that did not win a fire waits while another runs it, ms (default
   * `atMostMs` + 2 × the lease): it learns that the fire is done, or takes it over when that
   * run crashes, fails or loses its lock. `0` answers `false` at once: a crashed fire is then
   * not run again.
   */
  readonly waitMs?: number;
  /**
   * Lease of a fire's lock, ms: how long a crashed run holds its fire before a waiting
   * replica takes over. Default: the task's `distributedLease`, as node-cron passes it (its
   * own default is 30 s). Baton renews the lease while the task runs, so a task may run for
   * longer than it.
   */
  readonly ttlMs?: number;
  /**
   * Called once for every fire this process asked about, with what `runOnce` did: `ran` or
   * `failed` for a fire run here (after the task ended), `already-done`, `running-elsewhere`
   * or `attempts-exhausted` for one skipped. `job` is the task's name, `slot` the fire's
   * instant in UTC, to the second (`2026-12-01T02:00:00Z`).
   */
  readonly onResult?: (result: RunOnceResult<unknown>, fire: CronFire) => void;
}

/** One fire of a node-cron task, as Baton names it. */
export interface CronFire {
  /** The task's name: the `runOnce` job. */
  readonly job: string;
  /** The fire's instant in UTC, to the second: the `runOnce` slot. */
  readonly slot: string;
}

/**
 * A node-cron 4 `RunCoordinator` on Baton's `runOnce` records: pass it as a task's
 * `runCoordinator` (with `distributed: true` and a `name`), or to `cron.setRunCoordinator()`.
 */
export interface BatonRunCoordinator extends RunCoordinatorLike {
  /**
   * Wraps a task function so that it is given its fire's {@link RunContext} (the fencing
   * `token` to send with every write, the `signal` that aborts when the fire's lock is lost or
   * `atMostMs` passes, the `attempt`) and so that a task that throws is recorded `failed`, to
   * be retried by a waiting replica while attempts remain (an unwrapped task's fire is recorded
   * `done` whatever it did: node-cron does not tell the coordinator how a task ended). The
   * wrapped function throws a `ConfigError` when it runs outside a fire this coordinator
   * started (`task.execute()`, a task without `distributed: true`).
   */
  task<C extends CronTaskContext, T>(
    fn: (run: RunContext, context: C) => T | Promise<T>,
  ): (context: C) => Promise<T>;
  /**
   * The {@link RunContext} of the fire a task is running, from the context node-cron gave the
   * task; `undefined` outside a fire this coordinator started here.
   */
  runOf(context: CronTaskContext): RunContext | undefined;
  /**
   * Stops waiting on other replicas' runs and answers `false` to every later fire. A fire
   * running here goes on: its `onComplete` still records its outcome. Call it after
   * `cron.shutdown()` and before closing the Baton coordinator. Idempotent.
   */
  close(): void;
}

/** Default of {@link BatonRunCoordinatorOptions.atMostMs}: one hour. */
export const DEFAULT_AT_MOST_MS = 3_600_000;

const OPTION_KEYS = new Set(["atMostMs", "maxAttempts", "waitMs", "ttlMs", "onResult"]);

/** node-cron's key: the task's name, `:`, then `Date.toISOString()` of the fire. */
const KEY = /^(.+):(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/;

type Settled =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: unknown };

/** A fire this process asked about, from `shouldRun` until its `onComplete`. */
interface Fire extends CronFire {
  /** Set once the fire runs here. */
  run: RunContext | undefined;
  /** How the wrapped task ended, when it was wrapped. */
  ended: Settled | undefined;
  /** Ends the `runOnce` function, which holds the fire's lock until then. */
  finish(settled: Settled): void;
  /** Aborts the wait of a fire not running here. */
  readonly waiting: AbortController;
  readonly result: Promise<RunOnceResult<unknown>>;
}

/**
 * A node-cron 4 `RunCoordinator` that runs each fire of a distributed task once across
 * replicas, through `coordinator.runOnce(job, slot)`: the job is the task's name, the slot the
 * fire's instant in UTC to the second (as `coordinator.schedule()` names its slots).
 *
 * `shouldRun` answers `true` once this process holds the fire's lock and has recorded the
 * attempt; the lock stays held (and renewed) while node-cron runs the task, until
 * `onComplete`, which records the outcome and releases it. A fire recorded done is never run
 * again; a replica that did not win waits while the fire runs and takes it over if that run
 * crashes (after the lease), fails (with {@link BatonRunCoordinator.task}) or loses its lock.
 * The store is asked before the task runs; a store that does not answer makes `shouldRun`
 * reject, and node-cron skips the fire.
 *
 * @example
 * ```ts
 * const runs = batonRunCoordinator(coordinator);
 * cron.schedule("0 3 * * *", runs.task(({ token, signal }) => backup({ token, signal })), {
 *   name: "nightly-backup",
 *   distributed: true,
 *   runCoordinator: runs,
 * });
 * ```
 */
export function batonRunCoordinator(
  coordinator: Pick<Coordinator, "runOnce">,
  options: BatonRunCoordinatorOptions = {},
): BatonRunCoordinator {
  return new NodeCronRuns(coordinator, options);
}

class NodeCronRuns implements BatonRunCoordinator {
  readonly #coordinator: Pick<Coordinator, "runOnce">;
  readonly #options: BatonRunCoordinatorOptions;
  readonly #atMostMs: number;
  readonly #fires = new Map<string, Fire>();
  #closed = false;

  constructor(coordinator: Pick<Coordinator, "runOnce">, options: BatonRunCoordinatorOptions) {
    if (typeof coordinator?.runOnce !== "function") {
      throw new ConfigError("coordinator", "must be a Baton coordinator (createCoordinator())");
    }
    this.#coordinator = coordinator;
    this.#options = checkOptions(options);
    this.#atMostMs = this.#options.atMostMs ?? DEFAULT_AT_MOST_MS;
    // node-cron calls these detached from the object.
    this.shouldRun = this.shouldRun.bind(this);
    this.onComplete = this.onComplete.bind(this);
  }

  async shouldRun(key: string, ttlMs: number): Promise<boolean> {
    const { job, slot } = parseKey(key);
    // Two tasks of one name in one process: their fires are one, run by the first to ask.
    if (this.#closed || this.#fires.has(key)) return false;
    const ttl = this.#options.ttlMs ?? ttlMs;
    let started: (run: RunContext) => void = () => undefined;
    const start = new Promise<RunContext>((resolve) => {
      started = resolve;
    });
    let finish: (settled: Settled) => void = () => undefined;
    const finished = new Promise<Settled>((resolve) => {
      finish = resolve;
    });
    const waiting = new AbortController();
    const result = this.#coordinator.runOnce(
      job,
      slot,
      async (run) => {
        fire.run = run;
        started(run);
        const settled = await finished;
        if (!settled.ok) throw settled.error;
        return settled.value;
      },
      {
        atMostMs: this.#atMostMs,
        ttlMs: ttl,
        waitMs: this.#options.waitMs ?? Math.min(LIMITS.maxMs, this.#atMostMs + 2 * ttl),
        signal: waiting.signal,
        ...(this.#options.maxAttempts === undefined
          ? {}
          : { maxAttempts: this.#options.maxAttempts }),
      },
    );
    const fire: Fire = { job, slot, run: undefined, ended: undefined, finish, waiting, result };
    this.#fires.set(key, fire);
    let runsHere: boolean;
    try {
      runsHere = await Promise.race([start.then(() => true), result.then(() => false)]);
    } catch (error) {
      this.#fires.delete(key);
      // A wait that close() ended is a fire not run here, not a failure.
      if (waiting.signal.aborted && this.#closed) return false;
      throw error;
    }
    if (runsHere) return true;
    this.#fires.delete(key);
    this.#options.onResult?.(await result, { job, slot });
    return false;
  }

  async onComplete(key: string): Promise<void> {
    const fire = this.#fires.get(key);
    if (fire?.run === undefined) return;
    fire.finish(fire.ended ?? { ok: true, value: undefined });
    try {
      const result = await fire.result;
      this.#options.onResult?.(result, { job: fire.job, slot: fire.slot });
      // The task's own failure node-cron has logged; a failure of Baton's (the lock lost, the
      // outcome not recorded, atMostMs passed) it would not hear of otherwise.
      if (result.outcome === "failed") {
        const own = fire.ended?.ok === false && fire.ended.error === result.error;
        if (!own) throw result.error;
      }
    } finally {
      this.#fires.delete(key);
    }
  }

  task<C extends CronTaskContext, T>(
    fn: (run: RunContext, context: C) => T | Promise<T>,
  ): (context: C) => Promise<T> {
    if (typeof fn !== "function") {
      throw new ConfigError("fn", "must be a function (run, context) => ...");
    }
    return async (context: C) => {
      const fire = this.#fireOf(context);
      if (fire?.run === undefined) {
        throw new ConfigError(
          "task",
          `${describe(context)} ran outside a fire of this run coordinator: schedule it with distributed: true and runCoordinator (task.execute() runs a task outside any fire)`,
        );
      }
      try {
        const value = await fn(fire.run, context);
        fire.ended = { ok: true, value };
        return value;
      } catch (error) {
        fire.ended = { ok: false, error };
        throw error;
      }
    };
  }

  runOf(context: CronTaskContext): RunContext | undefined {
    return this.#fireOf(context)?.run;
  }

  close(): void {
    this.#closed = true;
    for (const fire of this.#fires.values()) {
      if (fire.run === undefined) fire.waiting.abort(new Error("the run coordinator was closed"));
    }
  }

  #fireOf(context: CronTaskContext): Fire | undefined {
    const name = context?.task?.name;
    if (name === undefined || !(context.date instanceof Date)) return undefined;
    return this.#fires.get(`${name}:${context.date.toISOString()}`);
  }
}

function parseKey(key: string): CronFire {
  const match = typeof key === "string" ? KEY.exec(key) : null;
  if (match === null) {
    throw new ConfigError(
      "key",
      `must be node-cron's "<task name>:<ISO 8601 instant>", got ${JSON.stringify(key)}`,
    );
  }
  return {
    job: match[1] as string,
    // A fire is on a whole second: the slot is named as coordinator.schedule() names it.
    slot: (match[2] as string).replace(/\.000Z$/, "Z"),
  };
}

function describe(context: CronTaskContext): string {
  const name = context?.task?.name;
  return name === undefined ? "the task" : `task "${name}"`;
}

function checkOptions(options: BatonRunCoordinatorOptions): BatonRunCoordinatorOptions {
  if (typeof options !== "object" || options === null) {
    throw new ConfigError("options", "must be an object");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new ConfigError(key, `is not an option (known: ${[...OPTION_KEYS].join(", ")})`);
    }
  }
  checkInt(options.atMostMs, "atMostMs", 1, LIMITS.maxMs);
  checkInt(options.maxAttempts, "maxAttempts", 1, 1_000);
  checkInt(options.waitMs, "waitMs", 0, LIMITS.maxMs);
  checkInt(options.ttlMs, "ttlMs", LIMITS.ttlMinMs, LIMITS.maxMs);
  if (options.onResult !== undefined && typeof options.onResult !== "function") {
    throw new ConfigError("onResult", "must be a function (result, { job, slot }) => void");
  }
  return options;
}

function checkInt(value: unknown, field: string, min: number, max: number): void {
  if (value === undefined) return;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(field, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
}
