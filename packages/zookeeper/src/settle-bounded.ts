import { BackendUnavailableError } from "@baton/core";

/** Outcome of a call that was given up on, delivered when it finally settles. */
export type LateOutcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Options of {@link bounded}. */
export interface BoundOptions<T> {
  /** Gives up after this many ms with a `BackendUnavailableError`. */
  readonly timeoutMs: number;
  /** Gives up when aborted, with the signal's reason. */
  readonly signals?: readonly (AbortSignal | undefined)[];
  /** Told how the call ended when it settles after we gave up. */
  readonly onLate?: (outcome: LateOutcome<T>) => void;
}

/**
 * Waits for `pending` at most `timeoutMs`, or until one of `signals` aborts. ZooKeeper calls
 * cannot be taken back, so a call given up on still runs: `onLate` sees its outcome.
 */
export function bounded<T>(
  pending: Promise<T>,
  what: string,
  options: BoundOptions<T>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const signals = (options.signals ?? []).filter((s): s is AbortSignal => s !== undefined);
    const cleanup = () => {
      clearTimeout(timer);
      for (const s of signals) s.removeEventListener("abort", onAbort);
    };
    const giveUp = (reason: unknown) => {
      if (settled) return;
      settled = true;
      cleanup();
      reject(reason);
      const onLate = options.onLate;
      if (onLate !== undefined) {
        pending.then(
          (value) => onLate({ ok: true, value }),
          (error: unknown) => onLate({ ok: false, error }),
        );
      } else pending.catch(() => undefined);
    };
    const onAbort = function (this: AbortSignal) {
      giveUp(this.reason);
    };
    const timer = setTimeout(
      () =>
        giveUp(
          new BackendUnavailableError(
            `zookeeper did not answer ${what} within ${options.timeoutMs} ms`,
          ),
        ),
      options.timeoutMs,
    );
    for (const s of signals) {
      if (s.aborted) {
        giveUp(s.reason);
        return;
      }
      s.addEventListener("abort", onAbort, { once: true });
    }
    pending.then(
      (value) => {
        if (settled) return;
        settled = true;
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        cleanup();
        reject(error);
      },
    );
  });
}
