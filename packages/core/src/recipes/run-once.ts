import type { Holder } from "../contract/backend.js";
import {
  BackendUnavailableError,
  ConfigError,
  LockLostError,
  LockTimeoutError,
  RunTimeoutError,
} from "../contract/errors.js";
import { isTransient } from "../contract/transient.js";
import { AbortScope } from "../helpers/abort-scope.js";
import { backoffMs } from "../helpers/backoff.js";
import type { Clock, Timer } from "../helpers/clock.js";
import { sleep } from "../helpers/clock.js";
import {
  checkFunction,
  checkInt,
  checkName,
  checkOptions,
  checkSignal,
  LIMITS,
} from "../helpers/validate.js";
import type { Lock, LockClient, RecipeHost, RecordAccess } from "../kernel/index.js";
import {
  decodeJobRecord,
  encodeJobRecord,
  type JobRecord,
  type JobRecordJson,
  jobRecordJson,
  withJson,
  withRecordJson,
} from "./job-record.js";

declare module "../kernel/events.js" {
  interface CoordinatorEvents {
    /**
     * A `runOnce` call (or a scheduled slot) ended here with `outcome`; `attempt` is given when
     * `fn` ran here (`ran`, `failed`).
     */
    jobRun: { job: string; slot: string; outcome: RunOutcome; attempt?: number };
  }
}

/** What `fn` of {@link Coordinator.runOnce} is given. */
export interface RunContext {
  /** The job. */
  readonly job: string;
  /** The slot being run, e.g. `2026-12-01T02:00`. */
  readonly slot: string;
  /** The fencing token of this attempt's lock: send it with every write to a fenced store. */
  readonly token: bigint;
  /** This attempt's number, from 1. */
  readonly attempt: number;
  /**
   * Aborted when the attempt must stop: past `atMostMs` (reason `RunTimeoutError`), on loss of
   * its lock (`LockLostError`), or when the caller's `signal` aborts. Like `Lock.signal`, its
   * `aborted`, `reason` and `throwIfAborted()` check the lock's deadline and `atMostMs` before
   * they answer: a job that resumes from a pause (SIGSTOP, a long GC, a blocked event loop)
   * sees that it must stop at its first check, before any timer has run. Check it before
   * every write the slot must not make twice.
   */
  readonly signal: AbortSignal;
}

/** Options of {@link Coordinator.runOnce}. */
export interface RunOnceOptions {
  /**
   * The longest an attempt may run, ms (default one hour, at most one day). Past it the
   * attempt's signal aborts with a `RunTimeoutError`, the attempt is recorded as failed and
   * its lock released, so another replica may retry; `fn` is not awaited any longer. An
   * attempt is recorded `done` only when, at the moment its outcome is written, its lock is
   * still held and `atMostMs` has not passed; otherwise it is recorded failed.
   */
  readonly atMostMs?: number;
  /** Attempts a slot gets in all, crashed ones included (default 3). */
  readonly maxAttempts?: number;
  /**
   * How long to wait while another replica runs the slot, ms (default 0: resolve at once with
   * `running-elsewhere`). A replica that waits takes over when that run crashes or fails and
   * learns when it is done, so schedulers pass a wait as long as a run may take.
   */
  readonly waitMs?: number;
  /** Lease of the slot's lock, ms (default: the coordinator's TTL). Renewed while `fn` runs. */
  readonly ttlMs?: number;
  /** Cancels the call; once `fn` runs, aborts its signal (the attempt is recorded as failed). */
  readonly signal?: AbortSignal;
}

/** What one call of {@link Coordinator.runOnce} did. */
export type RunOnceResult<T> =
  /** `fn` ran here and returned `value`; the slot is recorded done. */
  | { readonly outcome: "ran"; readonly value: T; readonly attempt: number; readonly token: bigint }
  /**
   * `fn` ran here and failed (or ran past `atMostMs`, or lost its lock); recorded, retried
   * while attempts remain. A schedule's `onResult` also hears of a tick that could not start
   * an attempt at all (the store did not answer) as `failed`, with `attempt` 0 and `token` 0n.
   */
  | {
      readonly outcome: "failed";
      readonly error: unknown;
      readonly attempt: number;
      readonly token: bigint;
      /** Attempts that remain for later calls. */
      readonly attemptsLeft: number;
    }
  /** Skipped: the slot was done before (by any replica); `record` says by whom. */
  | { readonly outcome: "already-done"; readonly record: JobRecord }
  /** Skipped: another replica holds the slot now (`holder`, when it could be read). */
  | { readonly outcome: "running-elsewhere"; readonly holder: Holder | null }
  /** Skipped: the slot failed `maxAttempts` times; `record` holds the last failure. */
  | { readonly outcome: "attempts-exhausted"; readonly record: JobRecord };

/**
 * What `JSON.stringify` writes for a {@link RunOnceResult}: its fields, with tokens in decimal
 * (`BigInt(json.token)` reads one back), records as {@link JobRecordJson}, and a failure's
 * error as its name, message and Baton `code` (when it has one). `value` is written as
 * `JSON.stringify` writes it.
 */
export type RunOnceResultJson =
  | {
      readonly outcome: "ran";
      readonly value: unknown;
      readonly attempt: number;
      readonly token: string;
    }
  | {
      readonly outcome: "failed";
      readonly error: { readonly name: string; readonly message: string; readonly code?: string };
      readonly attempt: number;
      readonly token: string;
      readonly attemptsLeft: number;
    }
  | { readonly outcome: "already-done" | "attempts-exhausted"; readonly record: JobRecordJson }
  | {
      readonly outcome: "running-elsewhere";
      readonly holder: (Omit<Holder, "token"> & { readonly token: string }) | null;
    };

/** The outcome names of {@link RunOnceResult}, as used in metrics and events. */
export type RunOutcome = RunOnceResult<unknown>["outcome"];

/** How long an attempt may run before its signal aborts, by default: one hour. */
export const DEFAULT_AT_MOST_MS = 3_600_000;
/** How many attempts a slot gets, by default. */
export const DEFAULT_MAX_ATTEMPTS = 3;
/** Writes lost to another writer before a call gives up (only a stale holder can race one). */
const MAX_RECORD_RACES = 8;
const OPTION_KEYS = ["atMostMs", "maxAttempts", "waitMs", "ttlMs", "signal"] as const;

interface ResolvedRunOnce {
  readonly atMostMs: number;
  readonly maxAttempts: number;
  readonly waitMs: number;
  readonly ttlMs: number | undefined;
  readonly signal: AbortSignal | undefined;
}

/** The lock (and record) name of one slot of one job. */
export function slotKey(job: string, slot: string): string {
  return checkName(`${job}/slot/${slot}`, "slot");
}

/** Runs `fn` for `(job, slot)` unless the slot is done or running elsewhere. @internal */
export async function runOnce<T>(
  host: RecipeHost,
  job: string,
  slot: string,
  fn: (context: RunContext) => T | Promise<T>,
  options: RunOnceOptions | undefined,
): Promise<RunOnceResult<T>> {
  checkName(job, "job");
  checkName(slot, "slot");
  checkFunction(fn, "fn", "must be a function ({ token, signal, slot, attempt }) => ...");
  const o = resolveRunOnceOptions(options);
  const key = slotKey(job, slot);
  const records = await host.records(o.signal);
  const result = withResultJson(await runSlot(host, records, { job, slot, key }, fn, o));
  host.events.emit("jobRun", { job, slot, outcome: result.outcome, ...attemptOf(result) });
  return result;
}

/**
 * `result` with a `toJSON` (not enumerable) that writes its {@link RunOnceResultJson}, so
 * `JSON.stringify(await coordinator.runOnce(...))` works despite the bigint tokens.
 *
 * @internal
 */
export function withResultJson<T>(result: RunOnceResult<T>): RunOnceResult<T> {
  return withJson(result, () => resultJson(result));
}

function resultJson(result: RunOnceResult<unknown>): RunOnceResultJson {
  switch (result.outcome) {
    case "ran":
      return { ...result, token: result.token.toString() };
    case "failed":
      return { ...result, token: result.token.toString(), error: errorJson(result.error) };
    case "already-done":
    case "attempts-exhausted":
      return { outcome: result.outcome, record: jobRecordJson(result.record) };
    case "running-elsewhere":
      return {
        outcome: result.outcome,
        holder:
          result.holder === null
            ? null
            : { ...result.holder, token: result.holder.token.toString() },
      };
  }
}

function errorJson(error: unknown): { name: string; message: string; code?: string } {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const code = (error as { code?: unknown }).code;
  return {
    name: error.name,
    message: error.message,
    ...(typeof code === "string" ? { code } : {}),
  };
}

function resolveRunOnceOptions(options: RunOnceOptions | undefined): ResolvedRunOnce {
  const o = checkOptions(options, "options", OPTION_KEYS);
  return {
    atMostMs:
      o.atMostMs === undefined
        ? DEFAULT_AT_MOST_MS
        : checkInt(o.atMostMs, "atMostMs", 1, LIMITS.maxMs),
    maxAttempts:
      o.maxAttempts === undefined
        ? DEFAULT_MAX_ATTEMPTS
        : checkInt(o.maxAttempts, "maxAttempts", 1, 1_000),
    waitMs: o.waitMs === undefined ? 0 : checkInt(o.waitMs, "waitMs", 0, LIMITS.maxMs),
    ttlMs:
      o.ttlMs === undefined ? undefined : checkInt(o.ttlMs, "ttlMs", LIMITS.ttlMinMs, LIMITS.maxMs),
    signal: o.signal === undefined ? undefined : checkSignal(o.signal),
  };
}

interface SlotId {
  readonly job: string;
  readonly slot: string;
  readonly key: string;
}

async function runSlot<T>(
  host: RecipeHost,
  records: RecordAccess,
  id: SlotId,
  fn: (context: RunContext) => T | Promise<T>,
  o: ResolvedRunOnce,
): Promise<RunOnceResult<T>> {
  // A slot done or given up is answered from its record alone, without taking its lock.
  const skip = skipFor((await readRecord(records, id.key))?.record, o.maxAttempts);
  if (skip !== undefined) return skip;
  const lock = await takeSlotLock(host.locks, id.key, o);
  if (lock === null) return { outcome: "running-elsewhere", holder: await holderOf(host, id.key) };
  try {
    const started = await startAttempt(records, id, lock, host.locks.ownerId, o.maxAttempts);
    if ("outcome" in started) return started;
    return await attempt(host, records, id, lock, started, fn, o);
  } finally {
    await lock.release().catch((error: unknown) => host.report(error, `releasing "${id.key}"`));
  }
}

/** The outcome of a slot whose record already decides it, or `undefined` to go on. */
function skipFor(
  record: JobRecord | undefined,
  maxAttempts: number,
): RunOnceResult<never> | undefined {
  if (record?.state === "done") return { outcome: "already-done", record };
  if (record?.state === "failed" && record.attempt >= maxAttempts) {
    return { outcome: "attempts-exhausted", record };
  }
  return undefined;
}

async function takeSlotLock(
  locks: LockClient,
  key: string,
  o: ResolvedRunOnce,
): Promise<Lock | null> {
  const lockOptions = {
    ...(o.ttlMs === undefined ? {} : { ttlMs: o.ttlMs }),
    ...(o.signal === undefined ? {} : { signal: o.signal }),
  };
  if (o.waitMs === 0) return await locks.tryAcquire(key, lockOptions);
  try {
    return await locks.acquire(key, { ...lockOptions, waitMs: o.waitMs });
  } catch (error) {
    if (error instanceof LockTimeoutError) return null;
    throw error;
  }
}

async function holderOf(host: RecipeHost, key: string): Promise<Holder | null> {
  try {
    return await host.locks.holder(key);
  } catch {
    return null;
  }
}

interface StartedAttempt {
  readonly attempt: number;
  readonly version: string;
  readonly startedAt: number;
}

/**
 * Records the start of an attempt under `lock`, deciding from the record: a faster replica
 * may have finished and released between our first read and our grant, and a record left
 * `running` by a lock that has ended is a crashed attempt, counted.
 */
async function startAttempt(
  records: RecordAccess,
  id: SlotId,
  lock: Lock,
  ownerId: string,
  maxAttempts: number,
): Promise<StartedAttempt | RunOnceResult<never>> {
  for (let race = 0; race < MAX_RECORD_RACES; race++) {
    const stored = await readRecord(records, id.key);
    const record = stored?.record;
    const skip = skipFor(record, maxAttempts);
    if (skip !== undefined) return skip;
    if (record !== undefined && record.token >= lock.token) {
      return { outcome: "running-elsewhere", holder: null };
    }
    const attempt = (record?.attempt ?? 0) + 1;
    if (record !== undefined && attempt > maxAttempts) {
      const version = await records.write(
        id.key,
        encodeJobRecord(crashed(record)),
        stored?.version ?? null,
      );
      if (version !== null) return { outcome: "attempts-exhausted", record: crashed(record) };
      continue;
    }
    const startedAt = Date.now();
    const running: JobRecord = {
      state: "running",
      attempt,
      token: lock.token,
      holder: ownerId,
      startedAt,
    };
    const version = await records.write(id.key, encodeJobRecord(running), stored?.version ?? null);
    if (version !== null) return { attempt, version, startedAt };
  }
  throw raceError(id.key);
}

/** A `running` record whose holder ended without an outcome, as a failure. */
function crashed(record: JobRecord): JobRecord {
  return withRecordJson({
    ...record,
    state: "failed",
    endedAt: Date.now(),
    error: `the holder (${record.holder}) ended without recording an outcome`,
  });
}

async function attempt<T>(
  host: RecipeHost,
  records: RecordAccess,
  id: SlotId,
  lock: Lock,
  started: StartedAttempt,
  fn: (context: RunContext) => T | Promise<T>,
  o: ResolvedRunOnce,
): Promise<RunOnceResult<T>> {
  const run = new AttemptSignal(host.clock, lock, o.signal, id, o.atMostMs);
  const context: RunContext = {
    job: id.job,
    slot: id.slot,
    token: lock.token,
    attempt: started.attempt,
    signal: run.signal,
  };
  try {
    const settled = await settleOrAbort(host, id, () => fn(context), run.signal);
    const outcome = await recordOutcome(host, records, id.key, started, lock, settled, run);
    if (outcome.ended.ok && outcome.written) {
      return {
        outcome: "ran",
        value: outcome.ended.value,
        attempt: started.attempt,
        token: lock.token,
      };
    }
    const error = outcome.ended.ok ? supersededError(id.key, lock.token) : outcome.ended.error;
    return {
      outcome: "failed",
      error,
      attempt: started.attempt,
      token: lock.token,
      attemptsLeft: Math.max(0, o.maxAttempts - started.attempt),
    };
  } finally {
    run.dispose();
  }
}

/**
 * The signal of one attempt (`RunContext.signal`): it ends when the attempt's lock does, when
 * the caller's signal aborts, or past `atMostMs`. Like a lock's own signal (the same kind of
 * scope, see `AbortScope` and `checkOnRead`), its `aborted`, `reason` and `throwIfAborted()`
 * check the lock's deadline and the attempt's bound before they answer, so a job resuming
 * from a pause (SIGSTOP, a long GC, a blocked event loop) sees that it must stop at its first
 * check, even when its own overdue timers and I/O callbacks run before the deadline timers.
 */
class AttemptSignal {
  readonly #scope: AbortScope;
  readonly #lock: Lock;
  readonly #clock: Clock;
  readonly #id: SlotId;
  readonly #atMostMs: number;
  /** Monotonic time past which the attempt has run longer than `atMostMs`. */
  readonly #endsAt: number;
  readonly #timer: Timer;

  constructor(
    clock: Clock,
    lock: Lock,
    caller: AbortSignal | undefined,
    id: SlotId,
    atMostMs: number,
  ) {
    this.#lock = lock;
    this.#clock = clock;
    this.#id = id;
    this.#atMostMs = atMostMs;
    this.#endsAt = clock.now() + atMostMs;
    this.#scope = new AbortScope(this);
    this.#scope.follow(lock.signal).follow(caller);
    this.#timer = clock.setTimer(() => this.#overran(), atMostMs);
  }

  get signal(): AbortSignal {
    return this.#scope.signal;
  }

  /**
   * The lock's deadline and the attempt's bound, now: past either, the signal aborts on the
   * spot, as the timers would have done. Run by the signal before it answers.
   */
  check(): void {
    if (this.#scope.aborted) return;
    if (!this.#lock.held) this.#scope.abort(this.#lock.signal.reason);
    else if (this.#clock.now() >= this.#endsAt) this.#overran();
  }

  /** Why the attempt must stop, checked now; `undefined` while it may go on. */
  stopped(): { readonly reason: unknown } | undefined {
    this.check();
    return this.#scope.aborted ? { reason: this.#scope.reason } : undefined;
  }

  dispose(): void {
    this.#timer.cancel();
    this.#scope.dispose();
  }

  #overran(): void {
    this.#scope.abort(new RunTimeoutError(this.#id.job, this.#id.slot, this.#atMostMs));
  }
}

type Settled<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown };

/**
 * `fn`'s outcome, or its signal's reason once that aborts: a run past its bound is not awaited
 * (its later failure is reported, not thrown).
 */
function settleOrAbort<T>(
  host: RecipeHost,
  id: SlotId,
  fn: () => T | Promise<T>,
  signal: AbortSignal,
): Promise<Settled<T>> {
  // Paused between the start record and here (lock or bound gone): `fn` does not start.
  if (signal.aborted) return Promise.resolve({ ok: false, error: signal.reason });
  let running: Promise<T>;
  try {
    running = Promise.resolve(fn());
  } catch (error) {
    return Promise.resolve({ ok: false, error });
  }
  return new Promise<Settled<T>>((resolve) => {
    const onAbort = () => {
      running.catch((error: unknown) => host.report(error, `the abandoned run of "${id.key}"`));
      resolve({ ok: false, error: signal.reason });
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    running.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve({ ok: true, value });
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        resolve({ ok: false, error });
      },
    );
  });
}

/**
 * Writes an attempt's outcome. `done` is written only while the attempt may still record it:
 * its lock held and `atMostMs` not passed, checked at the moment of each write; past either,
 * the attempt is recorded failed with the reason (or not at all, when a newer attempt has
 * taken the slot: every write is a compare-and-set on the version this attempt wrote, and a
 * record with a newer token is never overwritten). A store that does not answer is retried
 * for as long as the lock is held: while it is, nobody else can start the slot, and an
 * outcome left unwritten would have the slot run again.
 */
async function recordOutcome<T>(
  host: RecipeHost,
  records: RecordAccess,
  key: string,
  started: StartedAttempt,
  lock: Lock,
  settled: Settled<T>,
  run: AttemptSignal,
): Promise<{ readonly ended: Settled<T>; readonly written: boolean }> {
  let ended = settled;
  const base = {
    state: "done",
    attempt: started.attempt,
    token: lock.token,
    holder: host.locks.ownerId,
    startedAt: started.startedAt,
    endedAt: Date.now(),
  } as const;
  /** Every outcome sent so far, by value: a retry finds one stored when a lost reply took it. */
  const sent = new Map<string, Settled<T>>();
  for (let failures = 0; ; failures++) {
    const stop = run.stopped();
    if (ended.ok && stop !== undefined) ended = { ok: false, error: stop.reason };
    const record: JobRecord = ended.ok
      ? base
      : { ...base, state: "failed", error: messageOf(ended.error) };
    const value = encodeJobRecord(record);
    try {
      if (failures > 0) {
        // The store failed a write: what it holds now decides whether to write again.
        const stored = await records.read(key);
        const ours = stored === null ? undefined : sent.get(stored.value);
        if (ours !== undefined) return { ended: ours, written: true };
        const current = stored === null ? undefined : decodeJobRecord(stored.value);
        if (current === undefined || current.token > lock.token) return { ended, written: false };
      }
      sent.set(value, ended);
      const version = await records.write(key, value, started.version);
      return { ended, written: version !== null };
    } catch (cause) {
      if (!isTransient(cause) || !lock.held) {
        // The lock is gone and the store did not take the outcome: say so; do not throw, fn ran.
        return {
          ended: ended.ok ? { ok: false, error: unrecordedError(key, cause) } : ended,
          written: false,
        };
      }
      host.report(cause, `recording the outcome of "${key}" (retrying while the lock is held)`);
      await sleep(host.clock, backoffMs(failures, OUTCOME_RETRY), lock.signal).catch(
        () => undefined,
      );
    }
  }
}

const OUTCOME_RETRY = { minMs: 50, maxMs: 2_000 } as const;

async function readRecord(
  records: RecordAccess,
  key: string,
): Promise<{ record: JobRecord; version: string } | undefined> {
  const stored = await records.read(key);
  if (stored === null) return undefined;
  const record = decodeJobRecord(stored.value);
  if (record === undefined) {
    throw new ConfigError(
      "job",
      `the record of "${key}" holds something that is not a job record: another program writes to Baton's record keys; use another job name`,
    );
  }
  return { record, version: stored.version };
}

function attemptOf(result: RunOnceResult<unknown>): { attempt?: number } {
  if (result.outcome === "ran" || result.outcome === "failed") return { attempt: result.attempt };
  return {};
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 1_000);
}

/** The run finished, but a newer holder had taken the slot over: its outcome stands. */
function supersededError(key: string, token: bigint): LockLostError {
  return new LockLostError(key, token, "key-lost");
}

function unrecordedError(key: string, cause: unknown): BackendUnavailableError {
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new BackendUnavailableError(
    `the run of "${key}" finished, but its outcome could not be recorded before its lock was lost (${detail}); another replica may run the slot again`,
    { cause },
  );
}

function raceError(key: string): BackendUnavailableError {
  return new BackendUnavailableError(
    `the record of "${key}" changed under every one of ${MAX_RECORD_RACES} writes; gave up`,
  );
}
