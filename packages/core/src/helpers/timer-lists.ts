import { type Clock, systemClock, type Timer } from "./clock.js";

/**
 * Timers for core's own bounds on the production clock, grouped by delay: all timers of one delay share one Node.js
 * timer, armed for the first of them. A timer of a given delay is always due after every
 * earlier one of the same delay, so each group is a queue, and setting or cancelling a timer
 * is a few pointer moves: no Node.js timer is created, re-armed or cleared per call.
 *
 * Why: a lock operation sets and cancels bounds (an acquire's budget, a release's timeout, a
 * store call's `timeoutMs`) around every round trip, and a Node.js timeout created and cleared
 * each time is a `Timeout` object, a timer list created and dropped and a libuv ref toggled
 * (see docs/hot-path.md, "Core").
 *
 * The shared Node.js timer keeps the process alive only while a timer of its group that asked
 * for it (`keepAlive`) is pending. A cancelled group's Node.js timer is left armed, unref'd: it
 * fires once, finds nothing due, and arms itself for the next timer of its group if any.
 */

/** One pending timer. */
class Entry {
  readonly deadline: number;
  readonly keepAlive: boolean;
  callback: (() => void) | undefined;
  prev: Entry | undefined;
  next: Entry | undefined;
  list: TimerList | undefined;

  constructor(deadline: number, callback: () => void, keepAlive: boolean, list: TimerList) {
    this.deadline = deadline;
    this.callback = callback;
    this.keepAlive = keepAlive;
    this.list = list;
  }

  /** Cancels the timer; harmless after it fired or was cancelled. */
  cancel(): void {
    this.list?.remove(this);
  }
}

/** Longest delay a Node.js timer takes (longer ones fire after 1 ms, with a warning). */
const MAX_NODE_DELAY_MS = 2_147_483_647;

/** The timers of one delay, in the order they are due. */
class TimerList {
  readonly #delayMs: number;
  readonly #lists: Map<number, TimerList>;
  #head: Entry | undefined;
  #tail: Entry | undefined;
  /** Pending timers that keep the process alive. */
  #keepAlive = 0;
  #node: ReturnType<typeof setTimeout> | undefined;
  /** Running due callbacks (see #fire). */
  #firing = false;

  constructor(delayMs: number, lists: Map<number, TimerList>) {
    this.#delayMs = delayMs;
    this.#lists = lists;
  }

  add(callback: () => void, keepAlive: boolean): Entry {
    const entry = new Entry(performance.now() + this.#delayMs, callback, keepAlive, this);
    entry.prev = this.#tail;
    if (this.#tail === undefined) this.#head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    if (keepAlive && ++this.#keepAlive === 1) this.#node?.ref();
    // Armed for an earlier deadline already: it re-arms for this one when it fires. (While
    // firing, the end of the turn arms it for the first pending timer.)
    if (this.#node === undefined && !this.#firing) this.#arm(entry.deadline);
    return entry;
  }

  remove(entry: Entry): void {
    entry.list = undefined;
    entry.callback = undefined;
    const { prev, next } = entry;
    if (prev === undefined) this.#head = next;
    else prev.next = next;
    if (next === undefined) this.#tail = prev;
    else next.prev = prev;
    entry.prev = undefined;
    entry.next = undefined;
    if (entry.keepAlive && --this.#keepAlive === 0) this.#node?.unref();
  }

  #arm(deadline: number): void {
    const delay = Math.min(MAX_NODE_DELAY_MS, Math.max(0, Math.ceil(deadline - performance.now())));
    this.#node = setTimeout(() => this.#fire(), delay);
    if (this.#keepAlive === 0) this.#node.unref();
  }

  #fire(): void {
    this.#node = undefined;
    // Only timers set before this turn, and due now: one set by a callback runs on a later turn.
    const now = performance.now();
    const last = this.#tail;
    this.#firing = true;
    try {
      for (;;) {
        const entry = this.#head;
        if (entry === undefined || entry.deadline > now) break;
        const callback = entry.callback as () => void;
        this.remove(entry);
        callback();
        if (entry === last) break;
      }
    } finally {
      this.#firing = false;
      // A callback that threw still leaves the rest armed (due ones run on the next turn).
      const head = this.#head;
      if (head !== undefined) this.#arm(head.deadline);
      else if (this.#lists.get(this.#delayMs) === this) this.#lists.delete(this.#delayMs);
    }
  }

  /** For tests: whether the shared Node.js timer keeps the process alive, and pending timers. */
  get state(): { keepsAlive: boolean; pending: number } {
    let pending = 0;
    for (let e = this.#head; e !== undefined; e = e.next) pending++;
    return { keepsAlive: this.#node?.hasRef() ?? false, pending };
  }
}

/** A pending timer of {@link TimerLists}. */
export interface ListTimer {
  /** Cancels the timer; harmless after it fired or was cancelled. */
  cancel(): void;
}

/** Timers grouped by delay, each group on one Node.js timer (see the module comment). */
export class TimerLists {
  // Hot path: see docs/hot-path.md, "Core".
  readonly #lists = new Map<number, TimerList>();

  /**
   * Runs `callback` once, `delayMs` from now (monotonic), unless cancelled first. With
   * `keepAlive`, the process stays alive while it is pending.
   */
  set(callback: () => void, delayMs: number, keepAlive: boolean): ListTimer {
    const delay = Number.isNaN(delayMs) ? 0 : Math.max(delayMs, 0);
    let list = this.#lists.get(delay);
    if (list === undefined) {
      list = new TimerList(delay, this.#lists);
      this.#lists.set(delay, list);
    }
    return list.add(callback, keepAlive);
  }

  /** For tests: the groups by delay. */
  state(delayMs: number): { keepsAlive: boolean; pending: number } | undefined {
    return this.#lists.get(delayMs)?.state;
  }
}

const bounds = new TimerLists();

/**
 * Sets one of core's bounds: on the production clock through the shared {@link TimerLists},
 * on any other clock (a `ManualClock`, a caller's own) through `clock.setTimer`. A bound keeps
 * the process alive while it is pending when `keepAlive` is set.
 *
 * @internal
 */
export function setBound(
  clock: Clock,
  callback: () => void,
  delayMs: number,
  keepAlive: boolean,
): Timer {
  // Hot path: see docs/hot-path.md, "Core".
  if (clock === systemClock) return bounds.set(callback, delayMs, keepAlive);
  return clock.setTimer(callback, delayMs, keepAlive ? KEEP_ALIVE : undefined);
}

const KEEP_ALIVE = { keepAlive: true } as const;
