import { type Abortable, addAbortCallback, removeAbortCallback } from "./abort-scope.js";
import { NameTable } from "./name-table.js";

/** Told when a {@link KeyTurn} it follows ends, before the key is freed. */
export interface TurnListener {
  turnEnded(key: string, ms: number): void;
}

/**
 * One hold of a key of a {@link KeyedMutex}. `end()` frees the key, or hands it to the next
 * waiter; only the first call does anything. One small object per hold, no closures: a
 * coordinator keeps one for every lock it holds.
 */
export class KeyTurn {
  /** The mutex's queues until the turn ends. */
  #queues: NameTable<Array<() => void>> | undefined;
  readonly #key: string;
  #listener: TurnListener | undefined;
  #ms = 0;

  constructor(queues: NameTable<Array<() => void>> | undefined, key: string) {
    this.#queues = queues;
    this.#key = key;
  }

  /** `listener.turnEnded(key, ms)` runs as the turn ends, before the key is freed. */
  follow(listener: TurnListener, ms: number): this {
    if (this.#queues === undefined) return this; // ended, or NO_TURN
    this.#listener = listener;
    this.#ms = ms;
    return this;
  }

  end(): void {
    const queues = this.#queues;
    if (queues === undefined) return;
    this.#queues = undefined;
    this.#listener?.turnEnded(this.#key, this.#ms);
    const key = this.#key;
    const queue = queues.get(key);
    const next = queue === undefined || queue.length === 0 ? undefined : queue.shift();
    if (next === undefined) queues.delete(key);
    else next();
  }
}

/** A turn of nothing: for holds that take no key (permits of one name are held many at once). */
export const NO_TURN: KeyTurn = new KeyTurn(undefined, "");

/**
 * A FIFO mutex per key, in process. The coordinator queues same-name acquires here, so a
 * backend session never sees two outstanding acquires of one key.
 */
export class KeyedMutex {
  /** Locked keys and their waiters (`NO_WAITERS` until the first one comes). */
  readonly #queues = new NameTable<Array<() => void>>();

  /**
   * Resolves with the key's {@link KeyTurn} once `key` is ours. Rejects with `signal.reason`
   * if `signal` aborts first, leaving the queue as if we never asked.
   */
  lock(key: string, signal?: Abortable): Promise<KeyTurn> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let waiting = this.#queues.get(key);
    if (waiting === undefined) {
      this.#queues.set(key, NO_WAITERS);
      return Promise.resolve(new KeyTurn(this.#queues, key));
    }
    if (waiting === NO_WAITERS) {
      waiting = [];
      this.#queues.set(key, waiting);
    }
    const queue = waiting;
    return new Promise((resolve, reject) => {
      const grant = () => {
        if (signal !== undefined) removeAbortCallback(signal, cancel);
        resolve(new KeyTurn(this.#queues, key));
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

  /** The turn of `key` when it is free now (taking it), else `undefined`. Synchronous. */
  tryLock(key: string): KeyTurn | undefined {
    if (this.#queues.has(key)) return undefined;
    // Hot path: see docs/hot-path.md, "Core".
    this.#queues.set(key, NO_WAITERS);
    return new KeyTurn(this.#queues, key);
  }

  /** True when `key` is locked in this process. */
  isLocked(key: string): boolean {
    return this.#queues.has(key);
  }
}

/** The queue of a key locked with nobody waiting: shared, never written to. */
const NO_WAITERS: Array<() => void> = Object.freeze([]) as unknown as Array<() => void>;
