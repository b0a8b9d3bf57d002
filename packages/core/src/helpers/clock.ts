import { addSharedAbort, removeSharedAbort } from "./once-aborted.js";

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

const KEEP_ALIVE: TimerOptions = { keepAlive: true };
/** Longest delay a Node.js timer takes (a longer one fires after 1 ms, with a warning). */
const MAX_NODE_DELAY_MS = 2_147_483_647;

/** A Node.js timeout as a {@link Timer}. */
class NodeTimer implements Timer {
  readonly #timeout: ReturnType<typeof setTimeout>;

  constructor(timeout: ReturnType<typeof setTimeout>) {
    this.#timeout = timeout;
  }

  cancel(): void {
    clearTimeout(this.#timeout);
  }
}

/**
 * The production clock: `performance.now()`, and Node.js timers (unref'd unless `keepAlive`).
 * Grouping timers by delay on shared Node.js timers was measured and did not pay (see
 * docs/hot-path.md, "Core").
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(callback, delayMs, options) {
    const timeout = setTimeout(callback, Math.min(Math.max(0, delayMs), MAX_NODE_DELAY_MS));
    if (options?.keepAlive !== true) timeout.unref();
    return new NodeTimer(timeout);
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
