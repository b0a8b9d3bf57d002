import { addSharedAbort, removeSharedAbort } from "./shared-abort.js";
import { TimerLists } from "./timer-lists.js";

/**
 * Time as Baton sees it. Every lease deadline is computed on a monotonic clock
 * (`performance.now()` in production), never on wall-clock time.
 */
export interface Clock {
  /** Monotonic milliseconds. Only differences between two readings mean anything. */
  now(): number;
  /**
   * Runs `callback` once after `delayMs`. Timers for background work (keepalive, deadlines)
   * do not keep the process alive; timers a caller awaits (a wait for a lock) pass
   * `keepAlive: true`.
   */
  setTimer(callback: () => void, delayMs: number, options?: TimerOptions): Timer;
}

/** Options of {@link Clock.setTimer}. */
export interface TimerOptions {
  /** Keep the Node.js process alive while this timer is pending. Default `false`. */
  readonly keepAlive?: boolean;
}

/** A pending timer. */
export interface Timer {
  /** Cancels the timer; harmless after it fired. */
  cancel(): void;
}

const timers = new TimerLists();
const KEEP_ALIVE: TimerOptions = { keepAlive: true };

/**
 * The production clock: `performance.now()`, and timers grouped by delay on shared Node.js
 * timers (setting and cancelling one costs no Node.js timer).
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(callback, delayMs, options) {
    return timers.set(callback, delayMs, options?.keepAlive === true);
  },
};

/**
 * Sleeps `ms` on `clock`. Rejects with `signal.reason` when `signal` aborts first. Any number
 * of sleeps may share one signal: they add one "abort" listener to it between them. The sleep
 * keeps the process alive unless `options.keepAlive` is `false` (for background pauses).
 *
 * @example
 * await sleep(systemClock, 250, signal);
 */
export function sleep(
  clock: Clock,
  ms: number,
  signal?: AbortSignal,
  options: TimerOptions = KEEP_ALIVE,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimer(
      () => {
        if (signal !== undefined) removeSharedAbort(signal, onAbort);
        resolve();
      },
      ms,
      options,
    );
    if (signal !== undefined) addSharedAbort(signal, onAbort);
  });
}
