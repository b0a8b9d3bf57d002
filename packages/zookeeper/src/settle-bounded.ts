import { BackendUnavailableError } from "@baton/core";
import type { Interrupt } from "./interrupt.js";

/** Outcome of a call that was given up on, delivered when it finally settles. */
export type LateOutcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Options of {@link bounded}. */
export interface BoundOptions<T> {
  /** Gives up after this many ms with a `BackendUnavailableError`. */
  readonly timeoutMs: number;
  /** Gives up when it fires, with its reason. */
  readonly interrupt?: Interrupt;
  /** Told how the call ended when it settles after we gave up. */
  readonly onLate?: (outcome: LateOutcome<T>) => void;
  /** Called once if the call is still pending after `slowMs`. */
  readonly onSlow?: () => void;
  /** See `onSlow`. */
  readonly slowMs?: number;
}

/**
 * Waits for `pending` at most `timeoutMs`, or until `interrupt` fires. ZooKeeper calls cannot
 * be taken back, so a call given up on still runs: `onLate` sees its outcome.
 */
export function bounded<T>(
  pending: Promise<T>,
  what: string,
  options: BoundOptions<T>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let unsubscribe: (() => void) | undefined;
    const onSlow = options.onSlow;
    const slow =
      onSlow === undefined ? undefined : setTimeout(onSlow, options.slowMs ?? options.timeoutMs);
    const giveUp = (reason: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(slow);
      unsubscribe?.();
      reject(reason);
      const onLate = options.onLate;
      if (onLate !== undefined) {
        pending.then(
          (value) => onLate({ ok: true, value }),
          (error: unknown) => onLate({ ok: false, error }),
        );
      } else pending.catch(() => undefined);
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
    unsubscribe = options.interrupt?.subscribe(giveUp);
    pending.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(slow);
        unsubscribe?.();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(slow);
        unsubscribe?.();
        reject(error);
      },
    );
  });
}
