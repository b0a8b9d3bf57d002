import { onceAborted, systemClock } from "@baton/core";

/**
 * Wakes one of this process's waiters for a lock when a session of the same backend releases
 * it, the one that has paused longest, so waiters in one process take turns without waiting
 * out a poll interval and without all asking Azure at once. The others look again when their
 * own pause ends; waiters in other processes learn of a release at their next look.
 */
export class ReleaseWakeups {
  readonly #waiters = new Map<string, Set<() => void>>();

  /** Resolves after `ms`, at a release of `name`, or (rejecting) when `signal` aborts. */
  pause(name: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      let set = this.#waiters.get(name);
      if (set === undefined) {
        set = new Set();
        this.#waiters.set(name, set);
      }
      const waiters = set;
      const done = () => {
        timer.cancel();
        stopListening();
        waiters.delete(wake);
        if (waiters.size === 0 && this.#waiters.get(name) === waiters) this.#waiters.delete(name);
      };
      const wake = () => {
        done();
        resolve();
      };
      const timer = systemClock.setTimer(wake, ms, { keepAlive: true });
      const stopListening = onceAborted(signal, () => {
        done();
        reject(signal.reason);
      });
      waiters.add(wake);
    });
  }

  /** Wakes the waiter of `name` in this process that has paused longest, if any. */
  wake(name: string): void {
    const first = this.#waiters.get(name)?.values().next();
    if (first !== undefined && first.done !== true) first.value();
  }
}
