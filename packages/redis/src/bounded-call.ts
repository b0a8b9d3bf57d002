import { asUnavailable, BackendUnavailableError, systemClock } from "@baton/core";

/**
 * Races a store call against a timeout and an optional abort signal.
 *
 * - resolves with the call's value when it answers in time;
 * - rejects with `signal.reason` when `signal` aborts first;
 * - rejects with `BackendUnavailableError` when `timeoutMs` runs out or the call fails with a
 *   client or network error (a Baton error passes through unchanged).
 *
 * When the call is given up (timeout or abort), `onAbandoned` receives the still pending
 * promise, so a late grant can be released instead of left behind.
 */
export function boundedCall<T>(
  call: Promise<T>,
  options: {
    readonly timeoutMs: number;
    /** What the call does, for errors: `redis acquire`, or a whole phrase. */
    readonly what: string;
    /** The lock the call is about, if any: errors say `<what> of "<name>"`. */
    readonly name?: string | undefined;
    readonly signal?: AbortSignal | undefined;
    readonly onAbandoned?: ((late: Promise<T>) => void) | undefined;
  },
): Promise<T> {
  const { timeoutMs, signal, onAbandoned } = options;
  if (signal?.aborted) {
    onAbandoned?.(call);
    // The call may still settle; its error must not go unhandled.
    call.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    /** Ends the race once: false when it had already ended. */
    const finish = (): boolean => {
      if (settled) return false;
      settled = true;
      timer.cancel();
      signal?.removeEventListener("abort", onAbort);
      return true;
    };
    const abandon = (error: unknown) => {
      if (!finish()) return;
      onAbandoned?.(call);
      reject(error);
    };
    const onAbort = () => abandon(signal?.reason);
    // Core's timers: one shared Node.js timer per delay, not one created per call.
    const timer = systemClock.setTimer(
      () =>
        abandon(
          new BackendUnavailableError(`${describe(options)}: no answer within ${timeoutMs} ms`),
        ),
      timeoutMs,
      KEEP_ALIVE,
    );
    signal?.addEventListener("abort", onAbort, { once: true });
    call.then(
      (value) => {
        if (finish()) resolve(value);
      },
      (error: unknown) => {
        if (finish()) reject(asUnavailable(error, describe(options)));
      },
    );
  });
}

const KEEP_ALIVE = { keepAlive: true } as const;

/** The call's description for an error: built only on failure (this runs on every acquire). */
function describe(options: { readonly what: string; readonly name?: string | undefined }): string {
  return options.name === undefined ? options.what : `${options.what} of "${options.name}"`;
}
