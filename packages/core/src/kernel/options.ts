import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { LockBackend } from "../contract/backend.js";
import type { BackendUrl } from "../contract/backend-url.js";
import { ConfigError } from "../contract/errors.js";
import type { Fence } from "../contract/fence.js";
import { checkTtlSteps, type Guarantees } from "../contract/guarantees.js";
import type { Clock } from "../helpers/clock.js";
import {
  checkInt,
  checkName,
  checkOneOf,
  checkOptions,
  checkSignal,
  checkString,
  LIMITS,
} from "../helpers/validate.js";
import type { Logger } from "../observability/logger.js";
import { knownFencing, knownGuarantees, parseBackendUrl } from "./registry.js";

/**
 * `efficiency`: any backend; a rare double run only wastes work.
 * `correctness`: only backends with monotonic fencing tokens, and a fence raised with each
 * new token before user code runs.
 */
export type Mode = "efficiency" | "correctness";

/** Options of `createCoordinator`. Exactly one of `backend` and `url`. */
export interface CoordinatorOptions {
  /**
   * A backend instance, handed over: `close()` closes it too (a backend closes the
   * connections it opened, never a client you passed to it). Several coordinators may share
   * one backend: the last of them to close closes it. Pass `closeBackend: false` to keep it
   * open and close it yourself.
   */
  readonly backend?: LockBackend;
  /**
   * With `backend`: whether `close()` closes it (default true, once no other open
   * coordinator uses it). False: the backend stays open for you to reuse and close.
   */
  readonly closeBackend?: boolean;
  /** A backend URL such as `etcd://h1:2379,h2:2379` (the coordinator owns and closes it). */
  readonly url?: string;
  /** Lease length in ms. Default 15000. */
  readonly ttlMs?: number;
  /** Default `efficiency`. */
  readonly mode?: Mode;
  /**
   * Required in correctness mode, refused in efficiency mode: raised with every new token
   * before the lock is handed over, as `fence.raise(lockName, token, { signal, ttlMs })`, so
   * write through the fence with the lock name as its resource (or raise any other resource
   * yourself before writing to it).
   */
  readonly fence?: Fence;
  /** Who holds the locks, as `holder()` shows it. Default `hostname/pid/random`. */
  readonly ownerId?: string;
  /** Renewal interval in ms. Default and maximum: a third of the TTL. */
  readonly renewEveryMs?: number;
  /** Receives warnings about background failures (renewals, closes). */
  readonly logger?: Logger;
  /** Clock for deadlines and timers; default `performance.now()`. Tests pass a `ManualClock`. */
  readonly clock?: Clock;
  /**
   * Warn about a lock held this many ms: a `heldTooLong` event (and a logger warning) once
   * per grant, however often it is renewed. For every lock, semaphore permit and read or
   * write of this coordinator (not an election's term nor a partition's ownership, held for
   * as long as the process runs); an acquire's own `warnHeldMs` overrides it. Default: no
   * warning, and no timer per lock.
   */
  readonly warnHeldMs?: number;
  /**
   * Warn about an acquire that has waited this many ms for a held lock and still waits: a
   * `waitingTooLong` event (and a logger warning) once per acquire (not an election's
   * campaign). An acquire's own `warnWaitMs` overrides it. Default: no warning, and no timer
   * per wait.
   */
  readonly warnWaitMs?: number;
}

/** Options of `acquire` and `withLock`. */
export interface AcquireOptions {
  /** How long to wait for a held lock, in ms. 0 tries once. Default 60000. */
  readonly waitMs?: number;
  /** Cancels the wait; the acquire then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Published with the grant (shown by `holder()`), at most 4096 characters. */
  readonly value?: string;
  /**
   * This lock's lease length in ms, when it needs another than the coordinator's `ttlMs`:
   * how long the store keeps it after this process dies or is cut off, and how far the local
   * deadline reaches from each renewal. Stores lease per session (an etcd lease, a ZooKeeper
   * session, a PostgreSQL connection), so the coordinator keeps one session per TTL in use,
   * each renewed with one request every third of its TTL, whatever the number of locks on
   * it; a TTL's first lock pays for opening its session. At most 8 TTLs besides the
   * coordinator's. The TTL a store grants may differ (ZooKeeper bounds session timeouts):
   * `lock.ttlMs` tells. Default: the coordinator's.
   */
  readonly ttlMs?: number;
  /**
   * Warn when this lock has been held this many ms: a `heldTooLong` event (and a logger
   * warning) once, however often it is renewed; 0 never warns. Default: the coordinator's
   * `warnHeldMs`.
   */
  readonly warnHeldMs?: number;
  /**
   * Warn when this acquire has waited this many ms for the lock and still waits: a
   * `waitingTooLong` event (and a logger warning) once; 0 never warns. Default: the
   * coordinator's `warnWaitMs`.
   */
  readonly warnWaitMs?: number;
}

/** Options of `tryAcquire`: a try does not wait, so it has no `waitMs` and no `warnWaitMs`. */
export type TryAcquireOptions = Omit<AcquireOptions, "waitMs" | "warnWaitMs">;

/** Default lease length. */
export const DEFAULT_TTL_MS = 15_000;
/** Default wait of `acquire`. */
export const DEFAULT_WAIT_MS = 60_000;

const COORDINATOR_KEYS = [
  "backend",
  "closeBackend",
  "url",
  "ttlMs",
  "mode",
  "fence",
  "ownerId",
  "renewEveryMs",
  "logger",
  "clock",
  "warnHeldMs",
  "warnWaitMs",
] as const;
const ACQUIRE_KEYS = ["waitMs", "signal", "value", "ttlMs", "warnHeldMs", "warnWaitMs"] as const;
const TRY_KEYS = ["signal", "value", "ttlMs", "warnHeldMs"] as const;

/** Coordinator options after validation. */
export interface ResolvedOptions {
  readonly backend: LockBackend | undefined;
  /** Whether `close()` closes `backend`. */
  readonly closeBackend: boolean;
  readonly url: BackendUrl | undefined;
  readonly ttlMs: number;
  readonly mode: Mode;
  readonly fence: Fence | undefined;
  readonly ownerId: string;
  readonly renewEveryMs: number | undefined;
  readonly logger: Logger | undefined;
  readonly clock: Clock | undefined;
  /** Warn about a lock held this long (ms); undefined: never. */
  readonly warnHeldMs: number | undefined;
  /** Warn about an acquire waiting this long (ms); undefined: never. */
  readonly warnWaitMs: number | undefined;
}

/** The backend's kind, or the URL's scheme before it is loaded: for messages, without I/O. */
export function backendKindOf(
  backend: LockBackend | undefined,
  url: BackendUrl | undefined,
): string {
  return backend?.kind ?? url?.scheme ?? "?";
}

/** What the backend guarantees, when known without I/O (an instance, or an imported adapter). */
export function knownGuaranteesOf(
  backend: LockBackend | undefined,
  url: BackendUrl | undefined,
): Guarantees | undefined {
  return backend?.guarantees ?? (url === undefined ? undefined : knownGuarantees(url));
}

/** Validates coordinator options; throws `ConfigError` naming the field, before any I/O. */
export function resolveCoordinatorOptions(input: unknown): ResolvedOptions {
  if (input === undefined) throw new ConfigError("options", "pass { backend } or { url }");
  const o = checkOptions(input, "options", COORDINATOR_KEYS);
  const hasBackend = o.backend !== undefined;
  const hasUrl = o.url !== undefined;
  if (hasBackend === hasUrl) {
    throw new ConfigError("backend", "pass exactly one of `backend` (an instance) and `url`");
  }
  const backend = hasBackend ? checkBackend(o.backend) : undefined;
  const url = hasUrl ? parseBackendUrl(o.url) : undefined;
  const ttlMs =
    o.ttlMs === undefined
      ? DEFAULT_TTL_MS
      : checkInt(o.ttlMs, "ttlMs", LIMITS.ttlMinMs, LIMITS.maxMs);
  // A lease length the store cannot grant fails here, not at the first acquire.
  const guarantees = knownGuaranteesOf(backend, url);
  if (guarantees !== undefined) checkTtlSteps(ttlMs, guarantees, backendKindOf(backend, url));
  const renewEveryMs =
    o.renewEveryMs === undefined
      ? undefined
      : checkInt(o.renewEveryMs, "renewEveryMs", 1, Math.max(1, Math.floor(ttlMs / 3)));
  const mode =
    o.mode === undefined
      ? "efficiency"
      : checkOneOf(o.mode, "mode", ["efficiency", "correctness"] as const);
  const fence = o.fence === undefined ? undefined : checkFence(o.fence);
  if (mode === "correctness") {
    if (fence === undefined) {
      throw new ConfigError(
        "fence",
        "correctness mode needs a fence (an object with raise(resource, token)), e.g. new MemoryFence() or the PostgreSQL fence, so a paused old holder's writes are rejected",
      );
    }
    const fencing = backend?.guarantees.fencing ?? (url ? knownFencing(url) : undefined);
    if (fencing !== undefined) checkCorrectness(backendKindOf(backend, url), fencing);
  } else if (fence !== undefined) {
    throw new ConfigError(
      "fence",
      'is raised only in mode "correctness"; pass mode: "correctness" (with etcd, zookeeper or postgres) to have it raised with every new token, or leave the fence out',
    );
  }
  const ownerId =
    o.ownerId === undefined
      ? `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`
      : checkName(o.ownerId, "ownerId");
  const logger = o.logger === undefined ? undefined : checkLogger(o.logger);
  const clock = o.clock === undefined ? undefined : checkClock(o.clock);
  if (o.closeBackend !== undefined && typeof o.closeBackend !== "boolean") {
    throw new ConfigError("closeBackend", `must be true or false, got ${String(o.closeBackend)}`);
  }
  if (o.closeBackend !== undefined && !hasBackend) {
    throw new ConfigError(
      "closeBackend",
      "applies to a `backend` instance only: a backend made from `url` is always closed",
    );
  }
  const closeBackend = o.closeBackend !== false;
  const warnHeldMs =
    o.warnHeldMs === undefined ? undefined : checkInt(o.warnHeldMs, "warnHeldMs", 1, LIMITS.maxMs);
  const warnWaitMs =
    o.warnWaitMs === undefined ? undefined : checkInt(o.warnWaitMs, "warnWaitMs", 1, LIMITS.maxMs);
  return {
    backend,
    closeBackend,
    url,
    ttlMs,
    mode,
    fence,
    ownerId,
    renewEveryMs,
    logger,
    clock,
    warnHeldMs,
    warnWaitMs,
  };
}

/**
 * Throws `ConfigError` (field `mode`) when a backend with `fencing` cannot serve correctness
 * mode, saying why and what to use instead.
 */
export function checkCorrectness(kind: string, fencing: Guarantees["fencing"]): void {
  if (fencing === "monotonic") return;
  const why =
    fencing === "single-node"
      ? "its token counter lives on one node and can go backwards if that node loses its data or fails over to a lagging replica"
      : "it hands out no ordered fencing token, so a store cannot tell an old holder from a new one";
  throw new ConfigError(
    "mode",
    `correctness mode refuses the ${kind} backend: ${why}. Use etcd, zookeeper or postgres for correctness, or mode "efficiency" if a rare double run only wastes work`,
  );
}

/** Resolved `acquire` options. */
export interface ResolvedAcquire {
  readonly waitMs: number;
  readonly signal: AbortSignal | undefined;
  readonly value: string | undefined;
  /** The lock's own TTL, or undefined for the coordinator's. */
  readonly ttlMs: number | undefined;
  /** This lock's `warnHeldMs` (0: never), or undefined for the coordinator's. */
  readonly warnHeldMs: number | undefined;
  /** This acquire's `warnWaitMs` (0: never), or undefined for the coordinator's. */
  readonly warnWaitMs: number | undefined;
}

/** What no `acquire` options and no `tryAcquire` options resolve to: one shared object each. */
const ACQUIRE_DEFAULTS: ResolvedAcquire = Object.freeze({
  waitMs: DEFAULT_WAIT_MS,
  signal: undefined,
  value: undefined,
  ttlMs: undefined,
  warnHeldMs: undefined,
  warnWaitMs: undefined,
});
const TRY_DEFAULTS: ResolvedAcquire = Object.freeze({ ...ACQUIRE_DEFAULTS, waitMs: 0 });

/** Validates `acquire`/`withLock` options (`tryAcquire` when `tryOnly`). */
export function resolveAcquireOptions(input: unknown, tryOnly: boolean): ResolvedAcquire {
  // Hot path: see docs/hot-path.md, "Core".
  if (input === undefined) return tryOnly ? TRY_DEFAULTS : ACQUIRE_DEFAULTS;
  const o = checkOptions(input, "options", tryOnly ? TRY_KEYS : ACQUIRE_KEYS);
  const waitMs = tryOnly
    ? 0
    : o.waitMs === undefined
      ? DEFAULT_WAIT_MS
      : checkInt(o.waitMs, "waitMs", 0, LIMITS.maxMs);
  const signal = o.signal === undefined ? undefined : checkSignal(o.signal);
  const value =
    o.value === undefined ? undefined : checkString(o.value, "value", LIMITS.valueMaxLength);
  const ttlMs =
    o.ttlMs === undefined ? undefined : checkInt(o.ttlMs, "ttlMs", LIMITS.ttlMinMs, LIMITS.maxMs);
  const warnHeldMs =
    o.warnHeldMs === undefined ? undefined : checkInt(o.warnHeldMs, "warnHeldMs", 0, LIMITS.maxMs);
  const warnWaitMs =
    o.warnWaitMs === undefined ? undefined : checkInt(o.warnWaitMs, "warnWaitMs", 0, LIMITS.maxMs);
  return { waitMs, signal, value, ttlMs, warnHeldMs, warnWaitMs };
}

function checkBackend(value: unknown): LockBackend {
  const b = value as Partial<LockBackend> | null;
  if (
    b === null ||
    typeof b !== "object" ||
    typeof b.kind !== "string" ||
    typeof b.guarantees !== "object" ||
    typeof b.openSession !== "function" ||
    typeof b.close !== "function"
  ) {
    throw new ConfigError(
      "backend",
      "must be a LockBackend (kind, guarantees, openSession, close)",
    );
  }
  return b as LockBackend;
}

function checkFence(value: unknown): Fence {
  if (value === null || typeof value !== "object" || typeof (value as Fence).raise !== "function") {
    throw new ConfigError("fence", "must be a Fence: an object with raise(resource, token)");
  }
  return value as Fence;
}

function checkLogger(value: unknown): Logger {
  if (value === null || typeof value !== "object") {
    throw new ConfigError("logger", "must be an object such as console");
  }
  return value as Logger;
}

function checkClock(value: unknown): Clock {
  const c = value as Partial<Clock> | null;
  if (
    c === null ||
    typeof c !== "object" ||
    typeof c.now !== "function" ||
    typeof c.setTimer !== "function"
  ) {
    throw new ConfigError("clock", "must be a Clock (now, setTimer)");
  }
  return c as Clock;
}
