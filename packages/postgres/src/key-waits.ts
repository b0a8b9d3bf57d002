import type { WaiterPool } from "./waiter-pool.js";

/**
 * One server-side wait per key per backend: the local waiters of a key queue here in arrival
 * order, one waiter connection waits in the server until the key is free, and only the head
 * is woken to race for it. So a release wakes one local waiter, not all of them (no herd), and
 * waiters of one process take turns in FIFO order. Waiters in other processes still race.
 */
export class KeyWaits {
  readonly #pool: WaiterPool;
  readonly #queues = new Map<bigint, KeyQueue>();

  constructor(pool: WaiterPool) {
    this.#pool = pool;
  }

  /** Joins the queue of `key`. Call `leave()` on the ticket when done, in every case. */
  join(key: bigint): WaitTicket {
    let queue = this.#queues.get(key);
    if (queue === undefined) {
      queue = new KeyQueue(key, this.#pool, () => this.#queues.delete(key));
      this.#queues.set(key, queue);
    }
    return queue.join();
  }
}

/** A waiter's place in a key's queue. */
export interface WaitTicket {
  /**
   * Resolves when it is this waiter's turn to try: the key was free a moment ago. Calling it
   * again means the try failed; the waiter keeps its place at the head.
   */
  turn(signal: AbortSignal): Promise<void>;
  /** Leaves the queue (after a grant, an abort or an error). Idempotent. */
  leave(): void;
}

class Ticket implements WaitTicket {
  readonly #queue: KeyQueue;
  /** Woken while not waiting: the next `turn()` returns at once. */
  free = false;
  error: unknown;
  left = false;
  wake: ((error?: unknown) => void) | undefined;
  /** Set by the queue after a wake: called when the head has tried (next turn) or left. */
  acted: (() => void) | undefined;

  constructor(queue: KeyQueue) {
    this.#queue = queue;
  }

  turn(signal: AbortSignal): Promise<void> {
    this.#acted();
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.error !== undefined) return Promise.reject(this.error);
    if (this.free) {
      this.free = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.wake = undefined;
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.wake = (error?: unknown) => {
        signal.removeEventListener("abort", onAbort);
        this.wake = undefined;
        if (error === undefined) resolve();
        else reject(error);
      };
    });
  }

  leave(): void {
    if (this.left) return;
    this.left = true;
    this.#acted();
    this.#queue.remove(this);
  }

  #acted(): void {
    const acted = this.acted;
    this.acted = undefined;
    acted?.();
  }
}

class KeyQueue {
  readonly #key: bigint;
  readonly #pool: WaiterPool;
  readonly #onEmpty: () => void;
  readonly #tickets: Ticket[] = [];
  #running: AbortController | undefined;

  constructor(key: bigint, pool: WaiterPool, onEmpty: () => void) {
    this.#key = key;
    this.#pool = pool;
    this.#onEmpty = onEmpty;
  }

  join(): Ticket {
    const ticket = new Ticket(this);
    this.#tickets.push(ticket);
    if (this.#running === undefined) {
      const controller = new AbortController();
      this.#running = controller;
      void this.#run(controller.signal);
    }
    return ticket;
  }

  remove(ticket: Ticket): void {
    const at = this.#tickets.indexOf(ticket);
    if (at >= 0) this.#tickets.splice(at, 1);
    if (this.#tickets.length === 0) {
      // Nobody waits: cancel the server-side wait so nothing stays queued there.
      this.#running?.abort();
      this.#running = undefined;
      this.#onEmpty();
    }
  }

  async #run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && this.#tickets.length > 0) {
      try {
        await this.#pool.waitUntilFree(this.#key, signal);
      } catch (error) {
        if (signal.aborted) return;
        // The wait failed (server unreachable): every waiter learns it and leaves (core retries);
        // a waiter joining later starts a new wait.
        for (const t of [...this.#tickets]) {
          t.error = error;
          t.wake?.(error);
        }
        if (this.#running?.signal === signal) this.#running = undefined;
        return;
      }
      const head = this.#tickets[0];
      if (head === undefined) return;
      const acted = new Promise<void>((resolve) => {
        head.acted = resolve;
      });
      if (head.wake !== undefined) head.wake();
      else head.free = true;
      await acted;
    }
  }
}
