/**
 * What a backend session may have left behind, by lock name (a key or an item a failed
 * release or a lost reply left pointing at the session), and its cleanup, for adapters.
 * Cleanups run in the background ({@link LeftoverCleanup.retry}, e.g. after a keepalive), at
 * most one per name at a time and never while an acquire of the name is in flight
 * ({@link LeftoverCleanup.acquiring}); a leftover is forgotten once its cleanup succeeds,
 * unless a newer one of the name was remembered meanwhile.
 *
 * @typeParam T - what identifies a leftover (e.g. a create revision or a token; `null` when unknown)
 *
 * @example
 * readonly #leftovers = new LeftoverCleanup<bigint | null>(
 *   (name, token) => this.#deleteIfMine(name, token).then(() => true),
 *   this.#end.signal,
 * );
 */
export class LeftoverCleanup<T> {
  readonly #leftovers = new Map<string, T>();
  /** Lock names with an acquire in flight. */
  readonly #acquiring = new Set<string>();
  /** Cleanups running in the background, by lock name. */
  readonly #cleaning = new Map<string, Promise<void>>();
  readonly #clean: (name: string, leftover: T) => Promise<boolean> | boolean;
  readonly #ended: AbortSignal | undefined;

  /**
   * @param clean - cleans one leftover; resolves true when it is gone (a failure keeps it for
   *   the next retry). A plain `true` forgets it without a background run.
   * @param ended - once aborted (the session ended), {@link LeftoverCleanup.remember} keeps nothing
   */
  constructor(
    clean: (name: string, leftover: T) => Promise<boolean> | boolean,
    ended?: AbortSignal,
  ) {
    this.#clean = clean;
    this.#ended = ended;
  }

  /** Remembers the leftover of `name` (replacing an older one), unless the session ended. */
  remember(name: string, leftover: T): void {
    if (this.#ended?.aborted !== true) this.#leftovers.set(name, leftover);
  }

  /** Forgets the leftover of `name` (a later grant of the name superseded it, or it is cleaned). */
  forget(name: string): void {
    this.#leftovers.delete(name);
  }

  /** True when a leftover of `name` is remembered. */
  has(name: string): boolean {
    return this.#leftovers.has(name);
  }

  /** The leftover of `name`, or `undefined`. */
  get(name: string): T | undefined {
    return this.#leftovers.get(name);
  }

  /** Forgets every leftover (the session is closed and its store-side state goes with it). */
  clear(): void {
    this.#leftovers.clear();
  }

  /**
   * Runs an acquire of `name`: first waits for a cleanup of the name that is running, and no
   * new one starts until `acquire` settles.
   */
  async acquiring<R>(name: string, acquire: () => Promise<R>): Promise<R> {
    this.#acquiring.add(name);
    try {
      const running = this.#cleaning.get(name);
      if (running !== undefined) await running;
      return await acquire();
    } finally {
      this.#acquiring.delete(name);
    }
  }

  /** Starts the cleanup of every leftover whose name has no acquire or cleanup in flight. */
  retry(): void {
    for (const [name, leftover] of this.#leftovers) {
      if (this.#acquiring.has(name) || this.#cleaning.has(name)) continue;
      const cleaned = this.#clean(name, leftover);
      if (cleaned === true) {
        this.#leftovers.delete(name);
        continue;
      }
      if (cleaned === false) continue;
      const run: Promise<void> = cleaned
        .then(
          (done) => {
            if (done && this.#leftovers.get(name) === leftover) this.#leftovers.delete(name);
          },
          () => undefined,
        )
        .finally(() => {
          if (this.#cleaning.get(name) === run) this.#cleaning.delete(name);
        });
      this.#cleaning.set(name, run);
    }
  }
}
