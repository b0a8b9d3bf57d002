import type { BackendSession, InspectedHolder } from "../contract/backend.js";
import { ConfigError, StaleTokenError } from "../contract/errors.js";
import type { Fence } from "../contract/fence.js";
import type { AbortScope } from "../helpers/abort-scope.js";
import type { Clock } from "../helpers/clock.js";
import {
  checkName,
  checkOneOf,
  checkOptions,
  checkSignal,
  checkString,
} from "../helpers/validate.js";
import { type Logger, safeLog } from "../observability/logger.js";
import type { BackendLoader } from "./backend-loader.js";
import type { CoordinatorEventHub } from "./events.js";
import { boundedStep, type InspectionKind } from "./inspection.js";
import type { Lifecycle } from "./lifecycle.js";
import type { SessionPool } from "./session-pool.js";

declare module "./events.js" {
  interface CoordinatorEvents {
    /**
     * This coordinator force-released a grant of `name` (`coordinator.forceRelease`):
     * `released` is false when no grant with `token` held it any more. With a logger, it is
     * logged as a warning too, naming the holder and the reason.
     */
    forceReleased: { name: string; token: bigint; reason: string; released: boolean };
  }
}

/** The longest reason `coordinator.forceRelease` takes, in characters. */
export const FORCE_RELEASE_REASON_MAX_LENGTH = 1_000;

/** Options of `coordinator.forceRelease`. */
export interface ForceReleaseRequest {
  /**
   * Why, in words the holder's operators understand (required, 1 to 1000 characters): the
   * holder's lock ends with a `LockLostError` whose `reason` is `"revoked"` and whose
   * `detail` is this text, and the log line of both sides quotes it.
   */
  readonly reason: string;
  /**
   * The grant to free, by its fencing token (as `inspect()` shows it). Default: the current
   * holder's grant; a semaphore or read-write lock held by more than one grant needs it.
   */
  readonly token?: bigint;
  /**
   * What `name` is, as `inspect()` says: `"lock"` or `"election"` (a lock), `"semaphore"` or
   * `"read-write-lock"` (permits), `"job"` (the lock of the job's running slot,
   * `<job>/slot/<slot>`; with several running, the one whose token is `token`). Default: the
   * lock of that name if it is held, else its permits.
   */
  readonly kind?: InspectionKind;
  /** Cancels the call (rejects with its reason). */
  readonly signal?: AbortSignal;
}

/** What `coordinator.forceRelease` did. */
export interface ForceReleaseResult {
  /** The name asked for. */
  readonly name: string;
  /**
   * True when the store freed the grant; false when nothing held `name`, or no grant with
   * `token` held it any more (it was released, expired, or a later grant holds it).
   */
  readonly released: boolean;
  /** Where the grant was: a plain lock (`"lock"`) or a semaphore's or read-write lock's permits. */
  readonly space: "lock" | "permit";
  /** The freed grant's token; absent when nothing held `name` and no token was given. */
  readonly token?: bigint;
  /** Who held it, when it was read before the release. */
  readonly holder?: { readonly ownerId: string; readonly value?: string };
  /**
   * What the backend frees (its `forceRelease` guarantee): `"grant"` exactly this grant,
   * `"session"` the holder's whole session (every lock it held is revoked).
   */
  readonly scope: "grant" | "session";
}

const REQUEST_KEYS = ["reason", "token", "kind", "signal"] as const;
const KINDS = ["lock", "election", "semaphore", "read-write-lock", "job"] as const;

/** A backend session that force-releases grants. */
type ReleasingSession = BackendSession & Required<Pick<BackendSession, "forceRelease">>;

/** What a forced release needs from its coordinator. */
export interface ForceReleaseHost {
  readonly ttlMs: number;
  readonly clock: Clock;
  readonly events: CoordinatorEventHub;
  readonly logger: Logger | undefined;
  /** Correctness mode's fence, raised past the freed token before the store frees it. */
  readonly fence: Fence | undefined;
  readonly sessions: SessionPool;
  readonly backend: BackendLoader;
  readonly lifecycle: Lifecycle;
}

/** The error of `forceRelease()` on a backend that does not declare it. */
export function noForceReleaseError(kind: string): ConfigError {
  return new ConfigError(
    "backend",
    `the ${kind} backend cannot force-release a lock (its guarantees do not declare forceRelease)`,
  );
}

/** A grant found at the store: where, its token, and who holds it. */
interface Target {
  readonly space: "lock" | "permit";
  readonly token: bigint | undefined;
  readonly holder: InspectedHolder | undefined;
}

/**
 * Frees a grant of `name` at the store, whoever holds it (see `Coordinator.forceRelease`).
 * Checks its input before any I/O (`ConfigError` naming the field), then reads the holder,
 * raises correctness mode's fence past the grant's token (so the old holder's writes are
 * refused at once, before anyone else takes the lock), asks the store to free the grant, and
 * reports it as a `forceReleased` event and a warning in the log.
 */
export async function forceRelease(
  host: ForceReleaseHost,
  name: string,
  request: ForceReleaseRequest,
): Promise<ForceReleaseResult> {
  const { reason, token, kind, signal } = checkForceRelease(name, request);
  host.lifecycle.assertOpen();
  const known = host.backend.knownGuarantees();
  if (known !== undefined && known.forceRelease === undefined) {
    throw noForceReleaseError(host.backend.kind());
  }
  const backend = await host.backend.get();
  const scope = backend.guarantees.forceRelease;
  if (scope === undefined) throw noForceReleaseError(backend.kind);

  const target = await boundedStep(host, `the holder of "${name}"`, signal, async (bound) =>
    findTarget(await releasingSession(host, bound, backend.kind), name, kind, token),
  );
  if (target.token === undefined) return { name, released: false, space: target.space, scope };
  const grantToken = target.token;
  const fence = host.fence;
  // Correctness mode: the old holder's writes are refused from now on, even before anyone
  // else takes the lock (whose grant raises the fence again, higher). Only a grant that was
  // read at the store is fenced off: a token nobody holds must not lock out the holder.
  // Reads and semaphore permits never raise the fence, so they are not fenced off either.
  if (fence !== undefined && target.holder !== undefined && raisesFence(target)) {
    await raiseFence(host, fence, name, grantToken + 1n, signal);
  }
  const released = await boundedStep(
    host,
    `the forced release of "${name}"`,
    signal,
    async (bound) =>
      (await releasingSession(host, bound, backend.kind)).forceRelease(target.space, name, {
        token: grantToken,
        reason,
        signal: bound.signal,
      }),
  );
  host.events.emit("forceReleased", { name, token: grantToken, reason, released });
  safeLog(host.logger, "warn", forcedLine(name, target, grantToken, reason, released, scope));
  const holder = target.holder;
  return {
    name,
    released,
    space: target.space,
    token: grantToken,
    ...(holder === undefined
      ? {}
      : {
          holder:
            holder.value === undefined
              ? { ownerId: holder.ownerId }
              : { ownerId: holder.ownerId, value: holder.value },
        }),
    scope,
  };
}

/** A forced release's request, checked. */
export interface CheckedForceRelease {
  readonly reason: string;
  readonly token: bigint | undefined;
  readonly kind: InspectionKind | undefined;
  readonly signal: AbortSignal | undefined;
}

/**
 * Checks `forceRelease(name, request)`'s input, before any I/O: `ConfigError` naming the
 * field (a missing, blank or too long `reason`, a `token` that is no bigint of at least 0n,
 * an unknown `kind`).
 */
export function checkForceRelease(name: string, request: unknown): CheckedForceRelease {
  checkName(name);
  const o = checkOptions(request ?? {}, "options", REQUEST_KEYS);
  if (o.reason === undefined) {
    throw new ConfigError("reason", "is required: say why the lock is taken from its holder");
  }
  const reason = checkString(o.reason, "reason", FORCE_RELEASE_REASON_MAX_LENGTH);
  if (reason.trim().length === 0) throw new ConfigError("reason", "must not be blank");
  if (o.token !== undefined && (typeof o.token !== "bigint" || o.token < 0n)) {
    throw new ConfigError("token", `must be a bigint of at least 0n, got ${String(o.token)}`);
  }
  return {
    reason,
    token: o.token as bigint | undefined,
    kind: o.kind === undefined ? undefined : checkOneOf(o.kind, "kind", KINDS),
    signal: o.signal === undefined ? undefined : checkSignal(o.signal),
  };
}

/** The log line of a forced release: the lock, the token, the holder and the reason. */
function forcedLine(
  name: string,
  target: Target,
  token: bigint,
  reason: string,
  released: boolean,
  scope: "grant" | "session",
): string {
  const what = target.space === "lock" ? `lock "${name}"` : `a grant of "${name}"`;
  const holder = target.holder === undefined ? "" : ` held by "${target.holder.ownerId}"`;
  const whole = scope === "session" ? " (with every lock of its holder's session)" : "";
  return released
    ? `baton: force-released ${what} (token ${token})${holder}${whole}: ${JSON.stringify(reason)}`
    : `baton: forced release of ${what} (token ${token}) freed nothing: no grant with that token holds it any more; reason given: ${JSON.stringify(reason)}`;
}

/** True when the grant raised the fence when it was taken: a lock, or a read-write lock's write. */
function raisesFence(target: Target): boolean {
  return target.space === "lock" || target.holder?.mode === "write";
}

/** The live session, checked to force-release. */
async function releasingSession(
  host: ForceReleaseHost,
  bound: AbortScope,
  kind: string,
): Promise<ReleasingSession> {
  const session = (await host.sessions.current(bound)).backendSession;
  if (session.forceRelease === undefined) {
    throw new ConfigError(
      "backend",
      `the ${kind} backend declares forceRelease, but its session has no forceRelease: the adapter is broken`,
    );
  }
  return session as ReleasingSession;
}

/**
 * The grant to free: the one with `token` (any grant of the key, when the store cannot list a
 * permit key's holders), or the key's one holder.
 */
async function findTarget(
  session: BackendSession,
  name: string,
  kind: ForceReleaseRequest["kind"],
  token: bigint | undefined,
): Promise<Target> {
  if (kind === undefined || kind === "lock" || kind === "election" || kind === "job") {
    const holder = await session.holder(name);
    if (holder !== null && (token === undefined || holder.token === token)) {
      return { space: "lock", token: holder.token, holder };
    }
    if (kind !== undefined) return { space: "lock", token, holder: undefined };
  }
  const holders: readonly InspectedHolder[] | undefined =
    session.inspectKey !== undefined
      ? ((await session.inspectKey("permit", name))?.holders ?? [])
      : session.permitHolders !== undefined
        ? await session.permitHolders(name)
        : undefined;
  if (holders === undefined || holders.length === 0) {
    // Nothing held as permits: a token given is tried as a lock's unless permits were named.
    const space = kind === "semaphore" || kind === "read-write-lock" ? "permit" : "lock";
    return { space, token, holder: undefined };
  }
  if (token !== undefined) {
    return { space: "permit", token, holder: holders.find((h) => h.token === token) };
  }
  if (holders.length > 1) {
    throw new ConfigError(
      "token",
      `"${name}" is held by ${holders.length} grants (tokens ${holders.map((h) => h.token).join(", ")}): pass the token of the one to free`,
    );
  }
  const only = holders[0] as InspectedHolder;
  return { space: "permit", token: only.token, holder: only };
}

/** Raises `fence` for `name` to `token`, bounded by one TTL; a fence already past it is fine. */
async function raiseFence(
  host: ForceReleaseHost,
  fence: Fence,
  name: string,
  token: bigint,
  signal: AbortSignal | undefined,
): Promise<void> {
  await boundedStep(host, `the fence of "${name}"`, signal, async (bound) => {
    try {
      await fence.raise(name, token, { signal: bound.signal, ttlMs: host.ttlMs });
    } catch (error) {
      // A later grant raised it further already: the old holder is refused all the same.
      if (!(error instanceof StaleTokenError)) throw error;
    }
  });
}
