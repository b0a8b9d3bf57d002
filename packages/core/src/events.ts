import { ConfigError, type LockLostError, type LockLostReason } from "./errors.js";
import type { Lock } from "./lock.js";
import type { RunOutcome } from "./run-once.js";
import { onceAborted } from "./shared-abort.js";

/** Every event a coordinator emits, with its payload. Metrics are built on these. */
export interface CoordinatorEvents {
  /**
   * A lock (or a semaphore's permit, a read or a write) was granted. `waitedMs` counts from
   * the call to the grant. `lock` is the granted lock itself: the same object `lost` and
   * `released` carry, so listeners can tell apart several permits of one name.
   */
  acquired: { name: string; token: bigint; waitedMs: number; lock: Lock };
  /** A session renewal was confirmed. `locks` is how many locks it kept. */
  renewed: { durationMs: number; locks: number };
  /**
   * A renewal failed; the session lives until `remainingMs` runs out unless a retry succeeds.
   * `names` lists the locks that depend on it.
   */
  renewFailed: { error: unknown; remainingMs: number; names: readonly string[] };
  /** A lock can no longer be trusted (its signal aborted with `error`). Not emitted on release. */
  lost: { name: string; token: bigint; reason: LockLostReason; error: LockLostError; lock: Lock };
  /** A lock was released; `wasHeld` is false when it had already been lost. */
  released: { name: string; token: bigint; wasHeld: boolean; lock: Lock };
  /** A backend session opened with the TTL the store granted. */
  sessionOpened: { ownerId: string; ttlMs: number };
  /** The backend session ended for a reason other than `close()`; every lock on it was lost. */
  sessionLost: { error: unknown };
  /** This instance started campaigning in election `name`. */
  campaignStarted: { name: string };
  /** This instance became leader of election `name` for `term`. */
  elected: { name: string; term: bigint };
  /** This instance's term of election `name` ended. */
  revoked: { name: string; term: bigint; reason: string };
  /**
   * A `runOnce` call (or a scheduled slot) ended here with `outcome`; `attempt` is given when
   * `fn` ran here (`ran`, `failed`).
   */
  jobRun: { job: string; slot: string; outcome: RunOutcome; attempt?: number };
  /** A background step failed that affects no lock (e.g. closing a dead session). */
  backgroundError: { error: unknown; during: string };
}

/** Name of a {@link CoordinatorEvents} event. */
export type CoordinatorEventName = keyof CoordinatorEvents;

/** A listener of event `E`. */
export type CoordinatorListener<E extends CoordinatorEventName> = (
  payload: CoordinatorEvents[E],
) => void;

/**
 * Minimal logger: `console`, pino, bunyan, winston and anything with `warn` and `error`
 * methods fit, and the error reaches each in the shape it reads. A logger with pino's
 * `bindings()` or bunyan's `fields` is called as `(details, message)`, the details as
 * `{ err: error }` (their error serialiser's key); any other as `(message, error)`, as
 * console takes it.
 */
export interface Logger {
  debug?(message: string, details?: unknown): void;
  warn?(message: string, details?: unknown): void;
  error?(message: string, details?: unknown): void;
}

/**
 * A small typed event hub. A listener that throws never breaks the emitter: the error goes
 * to the logger (or is reported on stderr when there is none).
 */
export class EventHub {
  readonly #listeners = new Map<CoordinatorEventName, Set<(payload: never) => void>>();
  /** `addEventListener` listeners, each with the hub listener that calls it. */
  readonly #targets = new Map<
    CoordinatorEventName,
    Map<
      Parameters<EventTarget["addEventListener"]>[1],
      { wrapper: (payload: never) => void; stopOnAbort: (() => void) | undefined }
    >
  >();
  readonly #logger: Logger | undefined;

  constructor(logger?: Logger) {
    this.#logger = logger;
  }

  /** Subscribes; returns the function that unsubscribes. */
  on<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): () => void {
    checkListener(listener);
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (payload: never) => void);
    return () => {
      this.off(event, listener);
    };
  }

  /**
   * Subscribes for the next event only. `off(event, listener)` with the same listener removes
   * it before it runs, as with Node's `EventEmitter`.
   */
  once<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): void {
    checkListener(listener);
    const wrapper: OnceListener = (payload: never) => {
      this.off(event, wrapper as CoordinatorListener<E>);
      (listener as (payload: never) => void)(payload);
    };
    wrapper.listener = listener as (payload: never) => void;
    this.on(event, wrapper as CoordinatorListener<E>);
  }

  /**
   * `EventTarget`'s subscription: `listener` gets a `CustomEvent` whose `detail` is the
   * payload. Honours `once` and `signal`; adding the same listener twice adds it once.
   */
  addEventListener(
    type: string,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
    options?: Parameters<EventTarget["addEventListener"]>[2],
  ): void {
    if (listener === null) return;
    const event = type as CoordinatorEventName;
    let targets = this.#targets.get(event);
    if (targets === undefined) {
      targets = new Map();
      this.#targets.set(event, targets);
    }
    if (targets.has(listener)) return;
    const opts = typeof options === "object" ? options : {};
    if (opts.signal?.aborted) return;
    const unsubscribe = () => this.removeEventListener(type, listener);
    const stopOnAbort = opts.signal ? onceAborted(opts.signal, unsubscribe) : undefined;
    const wrapper = (payload: never) => {
      if (opts.once === true) unsubscribe();
      const dispatched = new CustomEvent(type, { detail: payload });
      if (typeof listener === "function") listener(dispatched);
      else listener.handleEvent(dispatched);
    };
    targets.set(listener, { wrapper, stopOnAbort });
    this.on(event, wrapper as CoordinatorListener<typeof event>);
  }

  /** Removes a listener added with {@link EventHub.addEventListener}. */
  removeEventListener(
    type: string,
    listener: Parameters<EventTarget["addEventListener"]>[1] | null,
  ): void {
    if (listener === null) return;
    const event = type as CoordinatorEventName;
    const targets = this.#targets.get(event);
    const entry = targets?.get(listener);
    if (targets === undefined || entry === undefined) return;
    targets.delete(listener);
    if (targets.size === 0) this.#targets.delete(event);
    entry.stopOnAbort?.();
    this.off(event, entry.wrapper as CoordinatorListener<typeof event>);
  }

  /** Unsubscribes `listener` (added with `on` or `once`); harmless when it is not there. */
  off<E extends CoordinatorEventName>(event: E, listener: CoordinatorListener<E>): void {
    const set = this.#listeners.get(event);
    if (set === undefined) return;
    if (!set.delete(listener as (payload: never) => void)) {
      for (const candidate of set) {
        if ((candidate as OnceListener).listener === listener) {
          set.delete(candidate);
          break;
        }
      }
    }
    if (set.size === 0) this.#listeners.delete(event);
  }

  /**
   * Whether `event` has a listener: the hot path (every acquire and release) builds its
   * payload only then.
   */
  listens(event: CoordinatorEventName): boolean {
    const set = this.#listeners.get(event);
    return set !== undefined && set.size > 0;
  }

  /** Delivers `payload` to every listener of `event`, synchronously. */
  emit<E extends CoordinatorEventName>(event: E, payload: CoordinatorEvents[E]): void {
    const set = this.#listeners.get(event);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as CoordinatorListener<E>)(payload);
      } catch (error) {
        if (this.#logger?.error)
          safeLog(this.#logger, "error", `baton: a "${event}" listener threw`, error);
        else process.emitWarning(`baton: a "${event}" listener threw: ${String(error)}`);
      }
    }
  }
}

/** A `once` listener, with the listener it stands for (so `off` finds it). */
type OnceListener = ((payload: never) => void) & { listener?: (payload: never) => void };

function checkListener(listener: unknown): void {
  if (typeof listener !== "function") {
    throw new ConfigError("listener", "must be a function taking the event's payload");
  }
}

/**
 * Calls `logger[level]` if present; a logger that throws is ignored, never propagated.
 *
 * Loggers take their arguments in one of two orders, and each keeps the error only in its
 * own: console, winston and most others take `(message, ...details)`; pino and bunyan take
 * `(details, message)` and drop arguments after the message that it has no `%` placeholder
 * for. A logger with pino's `bindings()` or bunyan's `fields` is called as
 * `(details, message)`, the details as `{ err: error }` when they are an error (both
 * libraries' error serialiser reads `err`); any other as `(message, details)`.
 */
export function safeLog(
  logger: Logger | undefined,
  level: keyof Logger,
  message: string,
  details?: unknown,
): void {
  try {
    const log = logger?.[level];
    if (logger === undefined || typeof log !== "function") return;
    if (details === undefined) log.call(logger, message);
    else if (takesDetailsFirst(logger)) log.call(logger, asFields(details) as never, message);
    else log.call(logger, message, details);
  } catch {
    // A broken logger must not break locking.
  }
}

/** Pino (`bindings()`) and bunyan (`fields`) loggers take `(details, message)`. */
function takesDetailsFirst(logger: Logger): boolean {
  const l = logger as { bindings?: unknown; fields?: unknown; child?: unknown };
  if (typeof l.child !== "function") return false;
  return typeof l.bindings === "function" || (typeof l.fields === "object" && l.fields !== null);
}

/** Details as a details-first logger's fields: an error (or any non-object) under `err`. */
function asFields(details: unknown): object {
  if (details instanceof Error || details === null || typeof details !== "object") {
    return { err: details };
  }
  return details;
}
