import type { TokenTag } from "./postgres-keys.js";

/*
 * A token lock: the fencing token of a grant held without a holder row (a token-kept grant)
 * is kept in one session-level SHARED advisory lock of PostgreSQL's two-integer key space,
 * (tag, offset), taken in the same statement as the lock (see Statements.acquireTokenKept).
 * The tag is the key's (see tokenTag in postgres-keys.ts); the offset is the token minus the
 * start value of the token sequence (which starts at the server's clock in microseconds, see
 * schema.ts). Both are non-negative int4 (offsets below TOKEN_LOCK_LIMIT, postgres-codec.ts),
 * so `classid` and `objid` of the lock in `pg_locks` read them back.
 *
 * A session takes a token lock for a key only while no other key of it (held, being acquired,
 * or left to unlock) has the same tag, so within one connection a tag names one grant
 * ({@link TagUses}). It also takes token locks for at most {@link MAX_TOKEN_LOCKS} keys at a
 * time: each is one more entry in PostgreSQL's shared lock table, whose size is about
 * `max_locks_per_transaction` per connection; a session that holds more records the rest in
 * holder rows.
 */

/**
 * Keys of one session that may use token locks at once (held, being acquired, or orphans):
 * the others record their holder in a row. A session's extra lock-table entries stay within
 * PostgreSQL's default `max_locks_per_transaction` (64).
 */
export const MAX_TOKEN_LOCKS = 64;

/** A key's use of its token-lock tag (counted in {@link TagUses} until it ends, once). */
export interface TagUse {
  readonly tag: TokenTag;
  ended: boolean;
}

/**
 * How many keys of one session use each token-lock tag: held, being acquired, or orphans. A
 * key takes a token lock only when its tag is unused (and fewer than {@link MAX_TOKEN_LOCKS}
 * tags are in use), so the connection's token lock of a tag belongs to one key, and a key
 * recorded in a row is never followed by a later token-kept grant that shares its tag
 * (`holder()` takes the newer token of the two; see Statements.holder).
 */
export class TagUses {
  readonly #uses = new Map<TokenTag, number>();

  /** Whether a key with `tag` may take a token lock now (see {@link TagUses}). */
  free(tag: TokenTag): boolean {
    return !this.#uses.has(tag) && this.#uses.size < MAX_TOKEN_LOCKS;
  }

  /** Counts one more use of `tag`, until {@link end}. */
  use(tag: TokenTag): TagUse {
    this.#uses.set(tag, (this.#uses.get(tag) ?? 0) + 1);
    return { tag, ended: false };
  }

  /** Ends `use` (again: nothing). */
  end(use: TagUse): void {
    if (use.ended) return;
    use.ended = true;
    const n = (this.#uses.get(use.tag) ?? 0) - 1;
    if (n > 0) this.#uses.set(use.tag, n);
    else this.#uses.delete(use.tag);
  }
}
