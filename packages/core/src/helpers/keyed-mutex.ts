import { type Abortable, addAbortCallback, removeAbortCallback } from "./abort-scope.js";

/**
 * A FIFO mutex per key, in process. The coordinator queues same-name acquires here, so a
 * backend session never sees two outstanding acquires of one key.
 */
export class KeyedMutex {
  /** Locked keys and their waiters (`NO_WAITERS` until the first one comes). */
  readonly #queues = new Map<string, Array<() => void>>();

  /**
   * Resolves with an idempotent `unlock` once `key` is ours. Rejects with `signal.reason`
   * if `signal` aborts first, leaving the queue as if we never asked.
   */
  lock(key: string, signal?: Abortable): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let waiting = this.#queues.get(key);
    if (waiting === undefined) {
      this.#queues.set(key, NO_WAITERS);
      return Promise.resolve(this.#unlocker(key));
    }
    if (waiting === NO_WAITERS) {
      waiting = [];
      this.#queues.set(key, waiting);
    }
    const queue = waiting;
    return new Promise((resolve, reject) => {
      const grant = () => {
        if (signal !== undefined) removeAbortCallback(signal, cancel);
        resolve(this.#unlocker(key));
      };
      const cancel = () => {
        const at = queue.indexOf(grant);
        if (at >= 0) queue.splice(at, 1);
        reject(signal?.reason);
      };
      queue.push(grant);
      if (signal !== undefined) addAbortCallback(signal, cancel);
    });
  }

  /** The `unlock` of `key` when it is free now (taking it), else `undefined`. Synchronous. */
  tryLock(key: string): (() => void) | undefined {
    if (this.#queues.has(key)) return undefined;
    // Hot path: see docs/hot-path.md, "Core".
    this.#queues.set(key, NO_WAITERS);
    return this.#unlocker(key);
  }

  /** True when `key` is locked in this process. */
  isLocked(key: string): boolean {
    return this.#queues.has(key);
  }

  #unlocker(key: string): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const queue = this.#queues.get(key);
      const next = queue === undefined || queue.length === 0 ? undefined : queue.shift();
      if (next === undefined) this.#queues.delete(key);
      else next();
    };
  }
}

/** The queue of a key locked with nobody waiting: shared, never written to. */
const NO_WAITERS: Array<() => void> = Object.freeze([]) as unknown as Array<() => void>;
