import type {
  BackendSession,
  KeyPage,
  KeySpace,
  KeyState,
  StoredRecord,
} from "../contract/backend.js";
import { asUnavailable, BackendUnavailableError, ConfigError } from "../contract/errors.js";
import type { Guarantees } from "../contract/guarantees.js";
import { AbortScope } from "../helpers/abort-scope.js";
import { raceAbortable } from "../helpers/bounded-call.js";
import type { Clock } from "../helpers/clock.js";
import type { BackendLoader } from "./backend-loader.js";
import { closedError, type Lifecycle } from "./lifecycle.js";
import type { SessionPool } from "./session-pool.js";

/**
 * The store's keys as an operator sees them, through the coordinator's live session: what
 * `coordinator.list()` and `coordinator.inspect()` are built on. Every call is bounded by one
 * TTL and ended by the caller's signal or `close()`.
 */
export interface InspectionAccess {
  /** The backend's declared fencing: tokens mean nothing under `"none"`. */
  readonly fencing: Guarantees["fencing"];
  /** True when the backend keeps durable records (runOnce's jobs, election markers). */
  readonly records: boolean;
  /** The backend's kind, for messages. */
  readonly kind: string;
  /** What the backend's forced release frees, or undefined when it has none. */
  readonly forceRelease: Guarantees["forceRelease"];
  /** One page of keys of `space` starting with `prefix`. */
  listKeys(
    space: KeySpace,
    prefix: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<KeyPage>;
  /** One lock or permit key's holders and waiters, or `null` when it has neither. */
  inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null>;
  /** Durable record `key`, or `null` (always `null` on a backend without records). */
  readRecord(key: string): Promise<StoredRecord | null>;
  /** Writes record `key` only when there is none; false when one was there (or no records). */
  createRecord(key: string, value: string): Promise<boolean>;
}

/**
 * What `coordinator.list()` and `coordinator.inspect()` tell a name apart as:
 * - `lock`: a plain lock;
 * - `semaphore`: a semaphore's permits;
 * - `read-write-lock`: a read-write lock's reads and write;
 * - `election`: the lock an election campaigns for (see `coordinator.elect`);
 * - `job`: a job of `coordinator.runOnce` or `coordinator.schedule`, with its slots.
 */
export type InspectionKind = "lock" | "semaphore" | "read-write-lock" | "election" | "job";

/** The error of `list()`, `inspect()` on a backend that does not declare `inspection`. */
export function noInspectionError(kind: string): ConfigError {
  return new ConfigError(
    "backend",
    `the ${kind} backend cannot list or inspect its keys (its guarantees do not declare inspection: true)`,
  );
}

/** A backend session that lists and inspects keys. */
type InspectingSession = BackendSession & Required<Pick<BackendSession, "listKeys" | "inspectKey">>;

/**
 * Reads for operators (lists of keys, their holders and waiters), each bounded by one TTL:
 * built only when `list()` or `inspect()` is called, so locks that never use them pay nothing.
 */
export class StoreInspection {
  readonly #context: StepContext;
  readonly #sessions: SessionPool;
  readonly #backend: BackendLoader;
  readonly #lifecycle: Lifecycle;

  constructor(
    ttlMs: number,
    clock: Clock,
    sessions: SessionPool,
    backend: BackendLoader,
    lifecycle: Lifecycle,
  ) {
    this.#context = { ttlMs, clock, lifecycle };
    this.#sessions = sessions;
    this.#backend = backend;
    this.#lifecycle = lifecycle;
  }

  /**
   * Access to the store's keys for the duration of one `list()` or `inspect()`: rejects with
   * `ConfigError` (field `backend`) when the backend does not declare `inspection`, before
   * any I/O when its guarantees are known without it. `signal` ends every call made through it.
   */
  async access(signal: AbortSignal | undefined): Promise<InspectionAccess> {
    this.#lifecycle.assertOpen();
    const known = this.#backend.knownGuarantees();
    if (known !== undefined && known.inspection !== true) {
      throw noInspectionError(this.#backend.kind());
    }
    const backend = await this.#backend.get();
    if (backend.guarantees.inspection !== true) throw noInspectionError(backend.kind);
    const guarantees = backend.guarantees;
    const kind = backend.kind;
    const session = async (bound: AbortScope): Promise<InspectingSession> => {
      const s = (await this.#sessions.current(bound)).backendSession;
      if (s.listKeys === undefined || s.inspectKey === undefined) {
        throw new ConfigError(
          "backend",
          `the ${kind} backend declares inspection, but its session has no listKeys/inspectKey: the adapter is broken`,
        );
      }
      return s as InspectingSession;
    };
    return {
      fencing: guarantees.fencing,
      records: guarantees.records,
      kind,
      forceRelease: guarantees.forceRelease,
      listKeys: (space, prefix, cursor, limit) =>
        boundedStep(this.#context, `the ${space} keys under "${prefix}"`, signal, async (bound) => {
          const s = await session(bound);
          const options = { space, prefix, limit, signal: bound.signal };
          return s.listKeys(cursor === undefined ? options : { ...options, cursor });
        }),
      inspectKey: (space, key) =>
        boundedStep(this.#context, `the ${space} key "${key}"`, signal, async (bound) =>
          (await session(bound)).inspectKey(space, key),
        ),
      readRecord: (key) =>
        guarantees.records
          ? boundedStep(this.#context, `the record "${key}"`, signal, async (bound) => {
              const s = await session(bound);
              return s.readRecord === undefined ? null : s.readRecord(key);
            })
          : Promise.resolve(null),
      createRecord: (key, value) =>
        guarantees.records
          ? boundedStep(this.#context, `the record "${key}"`, signal, async (bound) => {
              const s = await session(bound);
              if (s.writeRecord === undefined) return false;
              return (await s.writeRecord(key, value, null)) !== null;
            })
          : Promise.resolve(false),
    };
  }
}

/** What {@link boundedStep} needs of its coordinator. */
export interface StepContext {
  readonly ttlMs: number;
  readonly clock: Clock;
  readonly lifecycle: Lifecycle;
}

/**
 * One operator's step with the store (a read, a forced release, a fence raise), bounded by
 * one TTL and ended by `signal` or `close()`: rejects with `BackendUnavailableError` saying
 * `<what>: no answer within N ms` when the TTL runs out, the signal's reason,
 * `CoordinatorClosedError`, a `ConfigError` unchanged, or the store's error as a
 * `BackendUnavailableError` naming `what`.
 */
export async function boundedStep<T>(
  context: StepContext,
  what: string,
  signal: AbortSignal | undefined,
  call: (bound: AbortScope) => Promise<T>,
): Promise<T> {
  const lifecycle = context.lifecycle;
  lifecycle.assertOpen();
  const bound = new AbortScope().follow(signal);
  lifecycle.pending.add(bound);
  let timedOut = false;
  const timer = context.clock.setTimer(() => {
    timedOut = true;
    bound.abort(new Error("baton: budget ran out"));
  }, context.ttlMs);
  try {
    return await raceAbortable(call(bound), bound);
  } catch (error) {
    if (lifecycle.closing.signal.aborted) throw closedError();
    if (timedOut) {
      throw new BackendUnavailableError(`${what}: no answer within ${context.ttlMs} ms`);
    }
    if (signal?.aborted) throw signal.reason;
    if (error instanceof ConfigError) throw error;
    throw asUnavailable(error, what);
  } finally {
    timer.cancel();
    bound.dispose();
    lifecycle.pending.delete(bound);
  }
}
