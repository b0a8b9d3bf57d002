/**
 * Named errors. Every Baton error extends {@link BatonError}, is `instanceof`-checkable,
 * and carries a stable `code` that is safe to match in logs and alerts.
 */

/** Stable machine-readable codes of Baton's errors. */
export type BatonErrorCode =
  | "BATON_LOCK_TIMEOUT"
  | "BATON_LOCK_HELD"
  | "BATON_LOCK_LOST"
  | "BATON_SESSION_LOST"
  | "BATON_STALE_TOKEN"
  | "BATON_BACKEND_UNAVAILABLE"
  | "BATON_CONFIG"
  | "BATON_AUTH"
  | "BATON_CLOSED"
  | "BATON_RUN_TIMEOUT"
  | "BATON_SCHEDULE_STOPPED";

/** Base class of every error Baton throws. */
export class BatonError extends Error {
  /** Stable code, one per class. */
  readonly code: BatonErrorCode;

  constructor(code: BatonErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The wait for a lock ran out (`waitMs`) while someone else held it. */
export class LockTimeoutError extends BatonError {
  /** The lock name. */
  readonly lockName: string;
  /** How long the caller asked to wait. */
  readonly waitMs: number;

  constructor(lockName: string, waitMs: number, options?: { cause?: unknown }) {
    super(
      "BATON_LOCK_TIMEOUT",
      `lock "${lockName}" was not acquired within waitMs=${waitMs}: it stayed held by someone else`,
      options,
    );
    this.lockName = lockName;
    this.waitMs = waitMs;
  }
}

/** A try-once acquire (`waitMs: 0`) found the lock held by someone else. */
export class LockHeldError extends BatonError {
  /** The lock name. */
  readonly lockName: string;

  constructor(lockName: string) {
    super("BATON_LOCK_HELD", `lock "${lockName}" is held by someone else`);
    this.lockName = lockName;
  }
}

/**
 * Why a lock stopped being trustworthy.
 * - `released`: the holder released it (not a failure; the signal still aborts).
 * - `deadline`: no renewal was confirmed before the local deadline (last confirmed renewal + ttl - drift).
 * - `session-lost`: the backend reported the session gone (lease expired, connection closed).
 * - `key-lost`: the backend reported this one lock gone while the session lives on.
 * - `fence-rejected`: correctness mode could not raise the fence with this lock's token.
 * - `revoked`: an operator force-released it (`coordinator.forceRelease`); the error's
 *   `detail` carries the reason they gave.
 * - `closed`: the coordinator was closed while the lock was held.
 */
export type LockLostReason =
  | "released"
  | "deadline"
  | "session-lost"
  | "key-lost"
  | "fence-rejected"
  | "revoked"
  | "closed";

/** The reason a {@link Lock}'s `signal` aborts with: the lock can no longer be trusted. */
export class LockLostError extends BatonError {
  /** The lock name. */
  readonly lockName: string;
  /** The fencing token of the grant that was lost. */
  readonly token: bigint;
  /** Why it was lost. */
  readonly reason: LockLostReason;
  /** For `revoked`: the reason the operator gave to `forceRelease`. */
  readonly detail: string | undefined;

  constructor(
    lockName: string,
    token: bigint,
    reason: LockLostReason,
    options?: { cause?: unknown; detail?: string },
  ) {
    super("BATON_LOCK_LOST", describeLoss(lockName, token, reason, options?.detail), options);
    this.lockName = lockName;
    this.token = token;
    this.reason = reason;
    this.detail = options?.detail;
  }
}

function describeLoss(
  name: string,
  token: bigint,
  reason: LockLostReason,
  detail: string | undefined,
): string {
  const what = `lock "${name}" (token ${token})`;
  switch (reason) {
    case "released":
      return `${what} was released`;
    case "deadline":
      return `${what} can no longer be trusted: no renewal was confirmed before its local deadline`;
    case "session-lost":
      return `${what} was lost: the backend session ended`;
    case "key-lost":
      return `${what} was lost: the backend no longer holds it for this owner`;
    case "fence-rejected":
      return `${what} was rejected by the fence: a newer token was already seen`;
    case "revoked":
      return `${what} was revoked by a forced release${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`;
    case "closed":
      return `${what} was given up because the coordinator closed`;
  }
}

/** The backend session (lease, ZooKeeper session, database connection) is gone. */
export class SessionLostError extends BatonError {
  constructor(message = "the backend session was lost", options?: { cause?: unknown }) {
    super("BATON_SESSION_LOST", message, options);
  }
}

/** A fence refused a write or a raise because it has already seen a newer token. */
export class StaleTokenError extends BatonError {
  /** The fenced resource. */
  readonly resource: string;
  /** The token that was offered. */
  readonly token: bigint;
  /** The highest token the fence had seen. */
  readonly highest: bigint;

  constructor(resource: string, token: bigint, highest: bigint) {
    super(
      "BATON_STALE_TOKEN",
      `fence "${resource}" rejected token ${token}: it has already seen token ${highest}`,
    );
    this.resource = resource;
    this.token = token;
    this.highest = highest;
  }
}

/** The store could not be reached or did not answer. Never used to mean "held". */
export class BackendUnavailableError extends BatonError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("BATON_BACKEND_UNAVAILABLE", message, options);
  }
}

/** A bad option, lock name or URL. `field` names what was wrong. */
export class ConfigError extends BatonError {
  /** The option or argument that was wrong, e.g. `ttlMs` or `url`. */
  readonly field: string;

  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super("BATON_CONFIG", `${field}: ${message}`, options);
    this.field = field;
  }
}

/**
 * The store refused the credentials (a wrong password, an unknown user, a rejected key or
 * token). Like every {@link ConfigError} it is thrown at once and never retried: retrying the
 * same credentials cannot succeed. `field` names the option that carried them (`url`,
 * `password`, `credentials`, ...); the message names the host, never the secret.
 */
export class AuthenticationError extends ConfigError {
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super(field, message, options);
    (this as { code: BatonErrorCode }).code = "BATON_AUTH";
  }
}

/**
 * A semaphore acquired with a number of permits other than the one its holders and waiters
 * use (two deployments disagreeing on `permits`, or a read-write lock and a semaphore of one
 * name). Nothing was acquired or queued. The store forgets a name's number once nobody holds
 * or waits for it.
 */
export class PermitLimitError extends ConfigError {
  /** The semaphore's name (the backend key). */
  readonly key: string;
  /** The number the store holds for it. */
  readonly stored: number;
  /** The number asked for. */
  readonly requested: number;

  constructor(key: string, stored: number, requested: number) {
    super(
      "permits",
      `"${key}" has ${describeLimit(stored)} in the store, and this acquire asked for ${describeLimit(requested)}: every process must use one number of permits per name (change it once nobody holds or waits for it)`,
    );
    this.key = key;
    this.stored = stored;
    this.requested = requested;
  }
}

/** A permit limit in words: a read-write lock's, or a semaphore's count. */
function describeLimit(limit: number): string {
  return limit === 2_147_483_647 ? "a read-write lock's limit" : `${limit} permits`;
}

/**
 * A call on a coordinator after its `close()` began (acquire, tryAcquire, withLock, holder,
 * watch, elect, partitions), or an acquire that was still waiting when it closed. Expected
 * during shutdown, so it is not a `ConfigError`: alerts on bad configuration stay quiet.
 * Create a new coordinator to lock again.
 */
export class CoordinatorClosedError extends BatonError {
  constructor(message = "this coordinator is closed; create a new one to lock again") {
    super("BATON_CLOSED", message);
  }
}

/**
 * A `runOnce` attempt ran past its `atMostMs`: its signal was aborted with this error, the
 * attempt was recorded as failed and its lock released, so another replica may retry it.
 */
export class RunTimeoutError extends BatonError {
  /** The job. */
  readonly job: string;
  /** The slot. */
  readonly slot: string;
  /** The bound that ran out. */
  readonly atMostMs: number;

  constructor(job: string, slot: string, atMostMs: number) {
    super(
      "BATON_RUN_TIMEOUT",
      `job "${job}" slot "${slot}" ran past atMostMs=${atMostMs}: its signal was aborted and the attempt recorded as failed`,
    );
    this.job = job;
    this.slot = slot;
    this.atMostMs = atMostMs;
  }
}

/**
 * A schedule was stopped (`stop()`, its `signal`, or its coordinator's `close()`): the reason
 * the signal of a run it interrupts carries, and the error of that run's `failed` outcome.
 */
export class ScheduleStoppedError extends BatonError {
  /** The job. */
  readonly job: string;

  constructor(job: string) {
    super("BATON_SCHEDULE_STOPPED", `schedule "${job}" stopped`);
    this.job = job;
  }
}

/** True when `error` is an abort caused by `signal` (its reason, or a DOM AbortError). */
export function isAbortFrom(signal: AbortSignal | undefined, error: unknown): boolean {
  return signal?.aborted === true && (error === signal.reason || isAbortError(error));
}

/** True for a DOM-style `AbortError`. */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}

/**
 * `error` as a Baton error: itself when it is one, else a `BackendUnavailableError` saying
 * `context` (the store's own error is its cause). For adapters: a client or network error
 * becomes the error core retries on.
 */
export function asUnavailable(error: unknown, context: string): Error {
  if (error instanceof BatonError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new BackendUnavailableError(`${context}: ${detail}`, { cause: error });
}
