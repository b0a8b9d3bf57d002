import { queueKey } from "./postgres-keys.js";
import { QUEUE_WAIT, WAIT_UNTIL_FREE } from "./statements.js";
import { nextMacrotask, type Waiter, type WaiterPool } from "./waiter-pool.js";

/**
 * Waits of sessions whose own connection is busy: it already waits for another lock, or it
 * serves other callers' statements (see PostgresSession.acquire: a session waits on its
 * connection for one lock at a time, and only while nothing else needs the connection).
 *
 * One server-side wait per key per backend, and one backend's turn at a time per key: the
 * local waiters of a key queue here in arrival order, and one waiter connection waits in the
 * server for them. It first takes the key's queue key (see {@link queueKey}), which
 * PostgreSQL grants to one connection at a time, first come first served across processes;
 * holding it, it waits until the lock is free and wakes only the local head, which then tries.
 * So a release wakes one waiter in all the processes, not all of them (no herd). After a local
 * grant the connection goes to the back of the queue key's line if more local waiters remain,
 * so processes take turns.
 *
 * The queue key only decides who tries first; the lock is still only the session's advisory
 * lock, and a try without waiting (or by anyone else) can barge in. A queue key held by a
 * process that froze, or by something else, stops nobody for long: the wait for it is bounded
 * by a quarter of the TTL (then the waiter waits for the lock without it, as one of a herd,
 * once), and the holder's connection, idle, is ended by the server after the TTL. The wait
 * for the lock is bounded alike: PostgreSQL queues it behind sessions waiting on their own
 * connections, and a lock handed straight to one of them does not end it. A killed holder's
 * connection ends at once; an abandoned wait is cancelled and its queue key dropped before the
 * connection is reused.
 */
export class KeyWaits {
  readonly #pool: WaiterPool;
  readonly #queues = new Map<bigint, KeyQueue>();

  constructor(pool: WaiterPool) {
    this.#pool = pool;
  }

  /**
   * Joins the queue of `key` for a session of TTL `ttlMs`. Call `leave()` on the ticket when
   * done, in every case.
   */
  join(key: bigint, ttlMs: number): WaitTicket {
    let queue = this.#queues.get(key);
    if (queue === undefined) {
      queue = new KeyQueue(key, this.#pool, () => this.#queues.delete(key));
      this.#queues.set(key, queue);
    }
    return queue.join(ttlMs);
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
  readonly ttlMs: number;
  /** Woken while not waiting: the next `turn()` returns at once. */
  free = false;
  error: unknown;
  left = false;
  wake: ((error?: unknown) => void) | undefined;
  /**
   * Set by the queue after a wake: called when the head has tried and failed (next turn,
   * `false`) or left (`true`).
   */
  acted: ((left: boolean) => void) | undefined;

  constructor(queue: KeyQueue, ttlMs: number) {
    this.#queue = queue;
    this.ttlMs = ttlMs;
  }

  turn(signal: AbortSignal): Promise<void> {
    this.#acted(false);
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
    this.#acted(true);
    this.#queue.remove(this);
  }

  #acted(left: boolean): void {
    const acted = this.acted;
    this.acted = undefined;
    acted?.(left);
  }
}

class KeyQueue {
  readonly #key: bigint;
  readonly #queueKey: readonly [number, number];
  readonly #pool: WaiterPool;
  readonly #onEmpty: () => void;
  readonly #tickets: Ticket[] = [];
  #running: AbortController | undefined;

  constructor(key: bigint, pool: WaiterPool, onEmpty: () => void) {
    this.#key = key;
    this.#queueKey = queueKey(key);
    this.#pool = pool;
    this.#onEmpty = onEmpty;
  }

  join(ttlMs: number): Ticket {
    const ticket = new Ticket(this, ttlMs);
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
      // Nobody waits: cancel the server-side wait and drop the queue key.
      this.#running?.abort();
      this.#running = undefined;
      this.#onEmpty();
    }
  }

  async #run(signal: AbortSignal): Promise<void> {
    let waiter: Waiter;
    try {
      waiter = await this.#pool.take(signal);
    } catch (error) {
      if (!signal.aborted) this.#fail(error, signal);
      return;
    }
    const key = this.#key.toString();
    /** Whether this connection holds the queue key. */
    let queued = false;
    /** Whether it may have (then it must drop it before it is reused). */
    let queuedOnce = false;
    try {
      while (!signal.aborted && this.#tickets.length > 0) {
        const ttlMs = this.#ttlMs();
        // One wait in the server lasts at most a quarter of the shortest waiter's TTL.
        const bound = String(Math.max(50, Math.floor(ttlMs / 4)));
        if (queued) {
          // Bounded too: a lock handed straight to a session waiting on its own connection
          // does not end this wait; the head then tries (and can wait on its connection).
          await this.#pool.run(waiter, WAIT_UNTIL_FREE, [key, bound], signal);
        } else {
          queuedOnce = true;
          const [high, low] = this.#queueKey;
          const outcome = await this.#pool.run(
            waiter,
            QUEUE_WAIT,
            [high, low, key, bound, String(ttlMs)],
            signal,
          );
          if (outcome === "done") queued = true;
          else if (outcome === "lock-timeout") {
            // The queue key's holder is slow, frozen or foreign (or the lock was not freed in
            // time): wait for the lock without it this once.
            await this.#pool.run(waiter, WAIT_UNTIL_FREE, [key, bound], signal);
          }
          // Else cancelled (by a role's timeout or an administrator): the head tries.
        }
        const head = this.#tickets[0];
        if (head === undefined || signal.aborted) return;
        const acted = new Promise<boolean>((resolve) => {
          head.acted = resolve;
        });
        if (head.wake !== undefined) head.wake();
        else head.free = true;
        const left = await acted;
        if (left && queued) {
          // Served: let the next process try first at the next release, then come back
          // (after the grant has been handed out: see WaiterPool.give).
          queued = false;
          await nextMacrotask();
        }
      }
    } catch (error) {
      if (!signal.aborted) this.#fail(error, signal);
    } finally {
      this.#pool.give(waiter, queuedOnce);
    }
  }

  /** The shortest TTL of the waiters' sessions. */
  #ttlMs(): number {
    let ttlMs = Number.POSITIVE_INFINITY;
    for (const t of this.#tickets) ttlMs = Math.min(ttlMs, t.ttlMs);
    return Math.max(1, Math.floor(ttlMs));
  }

  /**
   * The wait failed (server unreachable): every waiter learns it and leaves (core retries); a
   * waiter joining later starts a new wait.
   */
  #fail(error: unknown, signal: AbortSignal): void {
    for (const t of [...this.#tickets]) {
      t.error = error;
      t.wake?.(error);
    }
    if (this.#running?.signal === signal) this.#running = undefined;
  }
}
