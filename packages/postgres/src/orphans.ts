import type { TagUse, TagUses } from "./token-locks.js";

/** A key the session's connection may still hold after a failed statement. */
export interface Orphan {
  readonly key: bigint;
  /** It may hold the key's token lock too (unlocked by its tag). */
  readonly tokenKept: boolean;
  /** Its use of its token-lock tag, ended when it is unlocked. */
  readonly use: TagUse;
}

/**
 * The keys of one session whose release (or acquire) failed while the connection lived
 * (session advisory locks outlive a failed statement): unlocked, with their token locks, by
 * the next renewal or before the key is taken again. Each keeps its use of its token-lock tag
 * until then, so no later grant of the session takes a token lock with that tag meanwhile.
 */
export class Orphans {
  readonly #byKey = new Map<bigint, Orphan>();
  readonly #tags: TagUses;

  constructor(tags: TagUses) {
    this.#tags = tags;
  }

  get size(): number {
    return this.#byKey.size;
  }

  has(key: bigint): boolean {
    return this.#byKey.has(key);
  }

  get(key: bigint): Orphan | undefined {
    return this.#byKey.get(key);
  }

  /** A snapshot of every orphan. */
  all(): Orphan[] {
    return [...this.#byKey.values()];
  }

  /** Keeps `orphan` (and its use of its tag) until it is unlocked. */
  keep(orphan: Orphan): void {
    const known = this.#byKey.get(orphan.key);
    if (known === undefined) {
      const { key, tokenKept, use } = orphan;
      this.#byKey.set(key, { key, tokenKept, use });
      return;
    }
    // The same key twice: one entry, one use.
    this.#tags.end(orphan.use);
    if (orphan.tokenKept && !known.tokenKept) {
      this.#byKey.set(orphan.key, { key: orphan.key, tokenKept: true, use: known.use });
    }
  }

  /** `orphan` was unlocked: forget it, unless it was replaced since (then it is unlocked again). */
  unlocked(orphan: Orphan): void {
    if (this.#byKey.get(orphan.key) !== orphan) return;
    this.#byKey.delete(orphan.key);
    this.#tags.end(orphan.use);
  }
}
