import { type Clock, systemClock, type Timer, type TimerOptions } from "@baton/core";

interface PendingCallback {
  readonly callback: () => void;
  cancelled: boolean;
}

/**
 * The clock of a process that can be frozen, like a VM or a process under SIGSTOP, inside one
 * Node.js process. Give it to one coordinator (`createCoordinator({ clock })`) and use it for
 * that runner's own sleeps.
 *
 * While paused:
 * - `now()` keeps advancing: real time passes for a frozen process too;
 * - timers that fall due do not fire (no keepalive, no local deadline); they fire late, in
 *   order, right after `resume()`;
 * - code parked on `untilRunning()` stays parked.
 *
 * On `resume()` the parked code continues first and the overdue timers fire on the next turn
 * of the event loop, as in a real process woken by SIGCONT: it finishes the step it was in
 * (here: the write it was about to send) before its event loop notices the lease ran out.
 */
export class PausableClock implements Clock {
  #paused = false;
  #overdue: PendingCallback[] = [];
  #parked: Array<() => void> = [];

  /** True between `pause()` and `resume()`. */
  get paused(): boolean {
    return this.#paused;
  }

  now(): number {
    return performance.now();
  }

  setTimer(callback: () => void, delayMs: number, options?: TimerOptions): Timer {
    const pending: PendingCallback = { callback, cancelled: false };
    const timer = systemClock.setTimer(
      () => {
        if (pending.cancelled) return;
        if (this.#paused) this.#overdue.push(pending);
        else callback();
      },
      delayMs,
      options,
    );
    return {
      cancel: () => {
        pending.cancelled = true;
        timer.cancel();
      },
    };
  }

  /** Freezes the process: from now on its timers and parked code wait for `resume()`. */
  pause(): void {
    this.#paused = true;
  }

  /** Resolves at once while running; while paused, when `resume()` is called. */
  untilRunning(): Promise<void> {
    if (!this.#paused) return Promise.resolve();
    return new Promise<void>((resolve) => this.#parked.push(resolve));
  }

  /** Wakes the process: parked code continues, then the overdue timers fire. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    for (const wake of this.#parked.splice(0)) wake();
    const overdue = this.#overdue.splice(0);
    setImmediate(() => {
      for (const pending of overdue) if (!pending.cancelled) pending.callback();
    });
  }
}
