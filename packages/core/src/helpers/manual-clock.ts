import type { Clock, Timer } from "./clock.js";

interface PendingTimer {
  readonly due: number;
  readonly seq: number;
  readonly callback: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told to, for unit tests of expiry and renewal without
 * waiting. Pass the same instance to `MemoryBackend` and `createCoordinator`, then
 * `await clock.advance(ms)`: due timers fire in order, and the promises they start are
 * allowed to settle between firings.
 *
 * @example
 * const clock = new ManualClock();
 * const backend = new MemoryBackend({ clock });
 * const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000 });
 * await clock.advance(5_000); // five seconds pass, renewals included
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: PendingTimer[] = [];

  /** @param start the first reading of `now()`; default 0. */
  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(callback: () => void, delayMs: number): Timer {
    const timer: PendingTimer = {
      due: this.#now + Math.max(0, delayMs),
      seq: this.#seq++,
      callback,
      cancelled: false,
    };
    this.#timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  /** Number of timers still pending. */
  get pendingTimers(): number {
    return this.#timers.filter((t) => !t.cancelled).length;
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due on the way, in order.
   * Resolves once the work those timers started has settled.
   */
  async advance(ms: number): Promise<void> {
    if (!Number.isFinite(ms) || ms < 0)
      throw new RangeError(`advance(ms) needs ms >= 0, got ${ms}`);
    const target = this.#now + ms;
    await settle();
    for (;;) {
      const next = this.#nextDue(target);
      if (next === undefined) break;
      this.#timers.splice(this.#timers.indexOf(next), 1);
      if (next.due > this.#now) this.#now = next.due; // overdue timers (after jump) run late
      next.callback();
      await settle();
    }
    this.#now = target;
    await settle();
  }

  /**
   * Moves time forward by `ms` WITHOUT firing timers: what a process sees in the instant it
   * resumes from a pause, before its overdue timers have run. The next `advance()` fires them.
   */
  jump(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`jump(ms) needs ms >= 0, got ${ms}`);
    this.#now += ms;
  }

  #nextDue(target: number): PendingTimer | undefined {
    this.#timers = this.#timers.filter((t) => !t.cancelled);
    let best: PendingTimer | undefined;
    for (const t of this.#timers) {
      if (t.due > target) continue;
      if (best === undefined || t.due < best.due || (t.due === best.due && t.seq < best.seq)) {
        best = t;
      }
    }
    return best;
  }
}

/** Lets pending promise chains run: a few macrotask turns. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
