import { BackendUnavailableError, BatonError, systemClock } from "@baton/core";

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
    readonly what: string;
    readonly signal?: AbortSignal | undefined;
    readonly onAbandoned?: ((late: Promise<T>) => void) | undefined;
  },
): Promise<T> {
  const { timeoutMs, what, signal, onAbandoned } = options;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
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
      () => abandon(new BackendUnavailableError(`${what}: no answer within ${timeoutMs} ms`)),
      timeoutMs,
      { keepAlive: true },
    );
    if (signal?.aborted) {
      abandon(signal.reason);
      // The call may still settle; its error must not go unhandled.
      call.catch(() => undefined);
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    call.then(
      (value) => {
        if (finish()) resolve(value);
      },
      (error: unknown) => {
        if (finish()) reject(asUnavailable(error, what));
      },
    );
  });
}

/** Wraps a client or network error as `BackendUnavailableError`; Baton errors pass through. */
export function asUnavailable(error: unknown, what: string): Error {
  if (error instanceof BatonError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new BackendUnavailableError(`${what}: ${detail}`, { cause: error });
}
