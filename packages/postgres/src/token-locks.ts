/**
 * The tag of a lock key's _token lock_: the fencing token of a grant held without a holder row
 * is kept in one session-level SHARED advisory lock of PostgreSQL's two-integer key space,
 * (tag, offset), taken in the same statement as the lock (see Statements.acquireFenced). The
 * offset is the token minus the start value of the token sequence (which starts at the
 * server's clock in microseconds, see schema.ts). Both are non-negative int4 (offsets below
 * {@link TOKEN_LOCK_LIMIT}), so `classid` and `objid` of the lock in `pg_locks` read them back. Queue keys (advisory-key.ts) have a negative first
 * integer, so they never coincide with a token lock.
 *
 * The tag is the low 31 bits of the key (a SHA-256 prefix, so a 31-bit hash). A session takes
 * a token lock for a key only while no other key of it (held, being acquired, or left to
 * unlock) has the same tag, so within one connection a tag names one grant. It also takes
 * token locks for at most {@link MAX_TOKEN_LOCKS} keys at a time: each is one more entry in
 * PostgreSQL's shared lock table, whose size is about `max_locks_per_transaction` per
 * connection; a session that holds more records the rest in holder rows.
 */
export type TokenTag = number;

/**
 * Tokens this far from the sequence's start and beyond are recorded in a holder row instead
 * (the offset does not fit in an int4).
 */
export const TOKEN_LOCK_LIMIT = 1n << 31n;

/**
 * Keys of one session that may use token locks at once (held, being acquired, or orphans):
 * the others record their holder in a row. A session's extra lock-table entries stay within
 * PostgreSQL's default `max_locks_per_transaction` (64).
 */
export const MAX_TOKEN_LOCKS = 64;

const MASK31 = 0x7fffffffn;

/** The token-lock tag of advisory key `key`. */
export function tokenTag(key: bigint): TokenTag {
  return Number(key & MASK31);
}
