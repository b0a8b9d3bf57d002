import { BackendUnavailableError } from "../contract/errors.js";
import {
  type Abortable,
  AbortScope,
  addAbortCallback,
  removeAbortCallback,
} from "./abort-scope.js";
import { systemClock, type Timer } from "./clock.js";
import { setBound } from "./timer-lists.js";

/** Options of {@link boundedCall}. */
export interface BoundedCallOptions<T> {
  /**
   * Gives up after this many ms, rejecting with a `BackendUnavailableError` that says
   * `<what>: no answer within <timeoutMs> ms`. Omit it to wait as long as the call takes.
   */
  readonly timeoutMs?: number | undefined;
  /** Gives up when it aborts, rejecting with its `reason`. */
  readonly signal?: AbortSignal | undefined;
  /** What the call does, for the timeout error: `redis acquire`, or a whole phrase. */
  readonly what?: string | undefined;
  /** The lock the call is about, if any: the timeout error says `<what> of "<name>"`. */
  readonly name?: string | undefined;
  /**
   * Turns the call's own failure into the error the caller sees (an adapter passes its
   * `toBatonError`). Not applied to the give-up errors. Default: the failure unchanged.
   */
  readonly mapError?: ((error: unknown) => unknown) | undefined;
  /**
   * Receives the still pending call when it is given up (timeout or abort), so a late grant
   * can be released instead of left behind. Without it, a late failure is swallowed.
   */
  readonly onAbandoned?: ((late: Promise<T>) => void) | undefined;
}

/**
 * Waits for a store call at most `timeoutMs`, or until `signal` aborts, whichever comes first.
 *
 * - resolves with the call's value when it answers in time;
 * - rejects with `signal.reason` when `signal` aborts first (at once when it already has);
 * - rejects with `BackendUnavailableError` when `timeoutMs` runs out;
 * - rejects with `mapError(error)` when the call fails.
 *
 * A call given up on may still run: `onAbandoned` sees it. Any number of calls may share one
 * signal; they add a single "abort" listener to it between them.
 *
 * @example
 * const value = await boundedCall(client.get(key), {
 *   timeoutMs: 2_000,
 *   signal,
 *   what: "read the holder",
 * });
 */
export function boundedCall<T>(call: Promise<T>, options: BoundedCallOptions<T>): Promise<T> {
  return raceAbortable(call, options.signal, options);
}

/**
 * {@link boundedCall} with any {@link Abortable} (a signal or a scope) as the signal.
 *
 * @internal
 */
export function raceAbortable<T>(
  call: Promise<T>,
  signal: Abortable | undefined,
  options?: Omit<BoundedCallOptions<T>, "signal">,
): Promise<T> {
  const timeoutMs = options?.timeoutMs;
  const onAbandoned = options?.onAbandoned;
  if (signal?.aborted) {
    abandon(call, onAbandoned);
    return Promise.reject(signal.reason);
  }
  if (timeoutMs === undefined && options?.mapError === undefined) {
    if (signal === undefined) return call;
    if (signal instanceof AbortScope) return raceScope(call, signal, onAbandoned);
  }
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timer: Timer | undefined;
    const finish = (): boolean => {
      if (settled) return false;
      settled = true;
      timer?.cancel();
      if (signal !== undefined) removeAbortCallback(signal, onAbort);
      return true;
    };
    const giveUp = (error: unknown) => {
      if (!finish()) return;
      abandon(call, onAbandoned);
      reject(error);
    };
    const onAbort = () => giveUp(signal?.reason);
    if (timeoutMs !== undefined) {
      // Hot path: see docs/hot-path.md, "Core" (timers grouped by delay).
      const armedAt = systemClock.now();
      timer = setBound(
        systemClock,
        () => {
          const pausedMs = pausedWithin(armedAt, timeoutMs);
          const timeout = () =>
            giveUp(
              new BackendUnavailableError(
                `${describe(options)}: no answer within ${timeoutMs} ms${pauseNote(pausedMs)}`,
              ),
            );
          // After a pause, timers run before the I/O that arrived meanwhile: let an answer
          // that is already waiting win before giving up.
          if (pausedMs === 0) timeout();
          else setImmediate(timeout);
        },
        timeoutMs,
        true,
      );
    }
    if (signal !== undefined) addAbortCallback(signal, onAbort);
    call.then(
      (value) => {
        if (finish()) resolve(value);
      },
      (error: unknown) => {
        if (!finish()) return;
        const mapError = options?.mapError;
        reject(mapError === undefined ? error : mapError(error));
      },
    );
  });
}

/**
 * The race of {@link raceAbortable} against a scope alone (no timeout, no mapping): the usual
 * one, an acquire's backend call against its bound, with fewer closures.
 */
function raceScope<T>(
  call: Promise<T>,
  scope: AbortScope,
  onAbandoned: ((late: Promise<T>) => void) | undefined,
): Promise<T> {
  // Hot path: see docs/hot-path.md, "Core".
  return new Promise<T>((resolve, reject) => {
    const onAbort = (reason: unknown) => {
      abandon(call, onAbandoned);
      reject(reason);
    };
    scope.addCallback(onAbort);
    call.then(
      (value) => {
        scope.removeCallback(onAbort);
        resolve(value);
      },
      (error: unknown) => {
        scope.removeCallback(onAbort);
        reject(error);
      },
    );
  });
}

function abandon<T>(call: Promise<T>, onAbandoned: ((late: Promise<T>) => void) | undefined) {
  if (onAbandoned !== undefined) onAbandoned(call);
  // The call may still fail; its error must not go unhandled.
  else call.catch(() => undefined);
}

/** The call's description for an error: built only on failure. */
function describe(
  options: { readonly what?: string | undefined; readonly name?: string | undefined } | undefined,
): string {
  const what = options?.what ?? "the store";
  return options?.name === undefined ? what : `${what} of "${options.name}"`;
}

/**
 * How long this process was paused (event loop blocked, process stopped) during a bound of
 * `boundMs` armed at `armedAt` on the monotonic clock and found due now: the timer's delay
 * past its due time when that is at least half the bound (and 50 ms), else 0. A timeout
 * error then says the store may not be at fault.
 *
 * @internal
 */
export function pausedWithin(armedAt: number, boundMs: number, now = systemClock.now()): number {
  const lateMs = now - armedAt - boundMs;
  return lateMs >= Math.max(50, boundMs / 2) ? Math.round(lateMs) : 0;
}

/**
 * The clause a timeout error adds when the process was paused through much of its bound
 * (see {@link pausedWithin}); empty otherwise.
 *
 * @internal
 */
export function pauseNote(pausedMs: number): string {
  if (pausedMs === 0) return "";
  return `; this process was paused for ${pausedMs} ms meanwhile (event loop blocked or process stopped), so the store may not be at fault`;
}
