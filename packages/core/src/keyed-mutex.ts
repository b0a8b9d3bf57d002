import { type Abortable, addAbortCallback, removeAbortCallback } from "./abort-scope.js";

/**
 * A FIFO mutex per key, in process. The coordinator queues same-name acquires here, so a
 * backend session never sees two outstanding acquires of one key.
 */
export class KeyedMutex {
  readonly #queues = new Map<string, Array<() => void>>();

  /**
   * Resolves with an idempotent `unlock` once `key` is ours. Rejects with `signal.reason`
   * if `signal` aborts first, leaving the queue as if we never asked.
   */
  lock(key: string, signal?: Abortable): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const waiting = this.#queues.get(key);
    if (waiting === undefined) {
      this.#queues.set(key, []);
      return Promise.resolve(this.#unlocker(key));
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        if (signal !== undefined) removeAbortCallback(signal, cancel);
        resolve(this.#unlocker(key));
      };
      const cancel = () => {
        const at = waiting.indexOf(grant);
        if (at >= 0) waiting.splice(at, 1);
        reject(signal?.reason);
      };
      waiting.push(grant);
      if (signal !== undefined) addAbortCallback(signal, cancel);
    });
  }

  /** The `unlock` of `key` when it is free now (taking it), else `undefined`. Synchronous. */
  tryLock(key: string): (() => void) | undefined {
    if (this.#queues.has(key)) return undefined;
    this.#queues.set(key, []);
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
      const next = queue?.shift();
      if (next === undefined) this.#queues.delete(key);
      else next();
    };
  }
}
