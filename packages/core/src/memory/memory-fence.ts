import { StaleTokenError } from "../contract/errors.js";
import type { Fence } from "../contract/fence.js";

/** Counts of a {@link MemoryFence}'s decisions. */
export interface FenceStats {
  /** Raises and writes let through. */
  readonly accepted: number;
  /** Raises and writes rejected with `StaleTokenError`. */
  readonly rejected: number;
}

/**
 * An in-process fence. `write()` checks the token, raises the fence and runs the write as one
 * step per resource (writes to a resource are serialised), so a rejected token never leaves
 * a write behind.
 */
export class MemoryFence implements Fence {
  readonly #highest = new Map<string, bigint>();
  readonly #queues = new Map<string, Promise<unknown>>();
  #accepted = 0;
  #rejected = 0;

  async raise(resource: string, token: bigint): Promise<void> {
    await this.write(resource, token, () => undefined);
  }

  /**
   * Runs `apply` only if `token` is at least the newest token seen for `resource`, raising
   * the fence to it first; rejects with `StaleTokenError` (and skips `apply`) otherwise.
   */
  write<T>(resource: string, token: bigint, apply: () => T | Promise<T>): Promise<T> {
    const previous = this.#queues.get(resource) ?? Promise.resolve();
    const run = previous.then(
      () => this.#check(resource, token, apply),
      () => this.#check(resource, token, apply),
    );
    const tail = run.catch(() => undefined);
    this.#queues.set(resource, tail);
    void tail.then(() => {
      if (this.#queues.get(resource) === tail) this.#queues.delete(resource);
    });
    return run;
  }

  /** The newest token seen for `resource`, or undefined. */
  highest(resource: string): bigint | undefined {
    return this.#highest.get(resource);
  }

  /** How many raises and writes were accepted and rejected so far. */
  get stats(): FenceStats {
    return { accepted: this.#accepted, rejected: this.#rejected };
  }

  async #check<T>(resource: string, token: bigint, apply: () => T | Promise<T>): Promise<T> {
    const highest = this.#highest.get(resource);
    if (highest !== undefined && token < highest) {
      this.#rejected++;
      throw new StaleTokenError(resource, token, highest);
    }
    this.#highest.set(resource, token);
    this.#accepted++;
    return await apply();
  }
}
