import { Cron } from "croner";
import { ConfigError, ScheduleStoppedError } from "../contract/errors.js";
import { isTransient } from "../contract/transient.js";
import { backoffMs } from "../helpers/backoff.js";
import { sleep } from "../helpers/clock.js";
import {
  checkFunction,
  checkInt,
  checkName,
  checkOptions,
  checkSignal,
  LIMITS,
} from "../helpers/validate.js";
import { noRecordsError, type RecipeHost } from "../kernel/index.js";
import {
  DEFAULT_AT_MOST_MS,
  DEFAULT_MAX_ATTEMPTS,
  type RunContext,
  type RunOnceResult,
  runOnce,
  withResultJson,
} from "./run-once.js";

/** Options of {@link Coordinator.schedule}. */
export interface ScheduleOptions<T = unknown> {
  /**
   * The IANA time zone the cron expression is read in (default `"UTC"`). Give every replica
   * the same one: the slot is named after the tick in UTC, so replicas agree on it anyway, but
   * "02:00" means a different instant in another zone.
   */
  readonly timezone?: string;
  /** See {@link RunOnceOptions.atMostMs} (default one hour). */
  readonly atMostMs?: number;
  /** See {@link RunOnceOptions.maxAttempts} (default 3). */
  readonly maxAttempts?: number;
  /** See {@link RunOnceOptions.ttlMs}. */
  readonly ttlMs?: number;
  /**
   * Missed slots: at start, the latest tick at most this many ms in the past is run if it is
   * not done (default 0: ticks before the start are not run). Ticks that pass while a run of
   * this replica lasts are handled the same way: the latest within the window runs next, older
   * ones are skipped. Every replica starting a missed slot still runs it once between them.
   */
  readonly catchUpMs?: number;
  /**
   * Called once for every tick this replica reaches, run or not: with what the slot's call did
   * (ran, failed, skipped). A tick whose call could not reach the store is tried again until
   * the next tick is due; if it still could not, `onResult` gets a `failed` outcome with
   * `attempt` 0 and `token` 0n (no attempt started; the error is also a `backgroundError`). A
   * run that `stop()` interrupts is `failed` with a `ScheduleStoppedError`. A listener that
   * throws is reported as a `backgroundError` event.
   */
  readonly onResult?: (result: RunOnceResult<T>, slot: string) => void;
  /** Stops the schedule when it aborts (as `stop()` does). */
  readonly signal?: AbortSignal;
  /**
   * The wall clock ticks are read from, in ms since the epoch (default `Date.now`). The slot
   * comes from the tick, not from this clock, so replicas whose clocks differ by seconds still
   * agree on it.
   */
  readonly now?: () => number;
}

/** A running schedule: see {@link Coordinator.schedule}. */
export interface Schedule extends AsyncDisposable {
  /** The job's name. */
  readonly job: string;
  /** The next tick this replica will run, or `null` when there is none (or it stopped). */
  nextRun(): Date | null;
  /**
   * Stops the schedule and waits for a run under way here to end: its signal is aborted with
   * a `ScheduleStoppedError`, and `onResult` hears of it as `failed` with that error.
   */
  stop(): Promise<void>;
}

const OPTION_KEYS = [
  "timezone",
  "atMostMs",
  "maxAttempts",
  "ttlMs",
  "catchUpMs",
  "onResult",
  "signal",
  "now",
] as const;
/** The longest single sleep: a wall clock that jumps is noticed within this. */
const MAX_SLEEP_MS = 60_000;

/** The slot name of a tick: its instant in UTC, to the second. */
export function slotOf(tick: Date): string {
  return tick.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * Starts running `fn` once per tick of `cron` across replicas (see `Coordinator.schedule`).
 * Throws `ConfigError` for bad input or a backend known to keep no records, and
 * `CoordinatorClosedError` after `close()`.
 */
export function schedule<T>(
  host: RecipeHost,
  cron: string,
  job: string,
  fn: (context: RunContext) => T | Promise<T>,
  options: ScheduleOptions<T> | undefined,
): Schedule {
  host.assertOpen();
  const guarantees = host.knownGuarantees();
  if (guarantees !== undefined && !guarantees.records) throw noRecordsError(host.backendKind());
  return new CronSchedule(host, cron, job, fn, options);
}

/** Runs `fn` once per cron tick across replicas. @internal */
export class CronSchedule<T> implements Schedule {
  readonly job: string;
  readonly #host: RecipeHost;
  readonly #untrack: () => void;
  readonly #fn: (context: RunContext) => T | Promise<T>;
  readonly #cron: Cron;
  readonly #options: ScheduleOptions<T>;
  readonly #now: () => number;
  readonly #stopping = new AbortController();
  readonly #loop: Promise<void>;
  #next: Date | null = null;

  constructor(
    host: RecipeHost,
    cron: string,
    job: string,
    fn: (context: RunContext) => T | Promise<T>,
    options: ScheduleOptions<T> | undefined,
  ) {
    this.job = checkName(job, "job");
    checkFunction(fn, "fn", "must be a function ({ token, signal, slot, attempt }) => ...");
    this.#options = checkScheduleOptions(options);
    this.#cron = parseCron(cron, this.#options.timezone ?? "UTC");
    this.#host = host;
    this.#fn = fn;
    this.#now = this.#options.now ?? Date.now;
    const signal = this.#options.signal;
    if (signal?.aborted) this.#stopping.abort(signal.reason);
    else signal?.addEventListener("abort", () => void this.stop(), { once: true });
    this.#untrack = host.track(() => this.stop());
    this.#loop = this.#run().catch((error: unknown) => host.report(error, `schedule "${job}"`));
  }

  nextRun(): Date | null {
    return this.#stopping.signal.aborted ? null : this.#next;
  }

  async stop(): Promise<void> {
    if (!this.#stopping.signal.aborted) {
      this.#stopping.abort(new ScheduleStoppedError(this.job));
      this.#untrack();
    }
    await this.#loop;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  async #run(): Promise<void> {
    const signal = this.#stopping.signal;
    let after = this.#now() - (this.#options.catchUpMs ?? 0) - 1;
    while (!signal.aborted) {
      const tick = this.#cron.nextRun(new Date(after));
      this.#next = tick;
      if (tick === null) return;
      if (!(await this.#sleepUntil(tick.getTime(), signal))) continue;
      await this.#runSlot(tick, signal);
      // Ticks that passed meanwhile: only those within the catch-up window still run.
      after = Math.max(tick.getTime(), this.#now() - (this.#options.catchUpMs ?? 0) - 1);
    }
  }

  /** Sleeps until `at` on the wall clock; false when it woke early (to look again). */
  async #sleepUntil(at: number, signal: AbortSignal): Promise<boolean> {
    const delay = at - this.#now();
    if (delay <= 0) return true;
    await sleep(this.#host.clock, Math.min(delay, MAX_SLEEP_MS), signal, KEEP_ALIVE).catch(
      () => undefined,
    );
    return !signal.aborted && at - this.#now() <= 0;
  }

  async #runSlot(tick: Date, signal: AbortSignal): Promise<void> {
    const slot = slotOf(tick);
    const o = this.#options;
    const atMostMs = o.atMostMs ?? DEFAULT_AT_MOST_MS;
    // A call that cannot reach the store is tried again until the next tick is due.
    const retryUntil = this.#cron.nextRun(tick)?.getTime() ?? tick.getTime() + atMostMs;
    let result: RunOnceResult<T>;
    for (let failures = 0; ; failures++) {
      try {
        result = await runOnce(this.#host, this.job, slot, this.#fn, {
          atMostMs,
          ...(o.maxAttempts === undefined ? {} : { maxAttempts: o.maxAttempts }),
          ...(o.ttlMs === undefined ? {} : { ttlMs: o.ttlMs }),
          // Wait out another replica's run: learn it is done, or take over if it crashes.
          waitMs: Math.min(LIMITS.maxMs, atMostMs + 2 * (o.ttlMs ?? this.#host.locks.ttlMs)),
          signal,
        });
        break;
      } catch (error) {
        const pauseMs = backoffMs(failures, TICK_RETRY);
        if (!signal.aborted && isTransient(error) && this.#now() + pauseMs < retryUntil) {
          this.#host.report(error, `schedule "${this.job}" slot "${slot}" (trying again)`);
          await sleep(this.#host.clock, pauseMs, signal).catch(() => undefined);
          if (!signal.aborted) continue;
        }
        if (!signal.aborted) this.#host.report(error, `schedule "${this.job}" slot "${slot}"`);
        result = notRun(signal.aborted ? signal.reason : error, o.maxAttempts);
        break;
      }
    }
    try {
      o.onResult?.(result, slot);
    } catch (error) {
      this.#host.report(error, `the onResult listener of schedule "${this.job}"`);
    }
  }
}

/** Pauses between calls of a tick whose store did not answer. */
const TICK_RETRY = { minMs: 100, maxMs: 5_000 } as const;

/** What `onResult` hears of a tick whose call failed before any attempt started. */
function notRun(error: unknown, maxAttempts: number | undefined): RunOnceResult<never> {
  return withResultJson({
    outcome: "failed",
    error,
    attempt: 0,
    token: 0n,
    attemptsLeft: maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
  });
}

/** A schedule keeps its process alive, as a server's listening socket does. */
const KEEP_ALIVE = { keepAlive: true } as const;

function parseCron(expression: unknown, timezone: string): Cron {
  if (typeof expression !== "string" || expression.trim() === "") {
    throw new ConfigError("cron", 'must be a cron expression such as "0 2 * * *"');
  }
  const fields = expression.trim().split(/\s+/).length;
  if (!expression.trim().startsWith("@") && fields !== 5 && fields !== 6) {
    throw new ConfigError(
      "cron",
      `"${expression}" has ${fields} fields: a cron expression has 5 (minute hour day month weekday) or 6 (with seconds first)`,
    );
  }
  try {
    return new Cron(expression, { timezone, paused: true });
  } catch (cause) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    throw new ConfigError("cron", `"${expression}" (time zone ${timezone}): ${detail}`, { cause });
  }
}

function checkScheduleOptions<T>(options: ScheduleOptions<T> | undefined): ScheduleOptions<T> {
  const o = checkOptions(options, "options", OPTION_KEYS) as ScheduleOptions<T>;
  if (o.timezone !== undefined) checkTimezone(o.timezone);
  if (o.atMostMs !== undefined) checkInt(o.atMostMs, "atMostMs", 1, LIMITS.maxMs);
  if (o.maxAttempts !== undefined) checkInt(o.maxAttempts, "maxAttempts", 1, 1_000);
  if (o.ttlMs !== undefined) checkInt(o.ttlMs, "ttlMs", LIMITS.ttlMinMs, LIMITS.maxMs);
  if (o.catchUpMs !== undefined) checkInt(o.catchUpMs, "catchUpMs", 0, 366 * LIMITS.maxMs);
  if (o.signal !== undefined) checkSignal(o.signal);
  for (const field of ["onResult", "now"] as const) {
    if (o[field] !== undefined) checkFunction(o[field], field);
  }
  return o;
}

function checkTimezone(timezone: unknown): void {
  if (typeof timezone !== "string")
    throw new ConfigError("timezone", 'must be an IANA time zone name such as "Europe/Paris"');
  try {
    new Intl.DateTimeFormat("en", { timeZone: timezone });
  } catch {
    throw new ConfigError(
      "timezone",
      `"${timezone}" is not a time zone this Node.js knows (IANA names such as "Europe/Paris" or "UTC")`,
    );
  }
}
