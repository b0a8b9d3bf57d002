/**
 * The two tags of a lock key's _token locks_: the fencing token of a grant held without a
 * holder row is kept in two session-level SHARED advisory locks of PostgreSQL's two-integer
 * key space, A = (token >> 31, tagA) and B = (token & 0x7fffffff, tagB), taken in the same
 * statement as the lock (see Statements.acquireFenced). Both pieces are >= 0 (tokens below
 * {@link TOKEN_LOCK_LIMIT}), so `classid` of the two locks in `pg_locks` reads them back.
 *
 * tagA is 2 × bits 32..61 of the key and tagB 2 × bits 0..29 of it plus 1 (the key is a
 * SHA-256 prefix, so these are two independent 30-bit hashes): non-negative int4, tagA even
 * and tagB odd, so an A lock of one key is never a B lock of another. A session takes token
 * locks for a key only while no other key of it (held, being acquired, or left to unlock)
 * shares either tag, so within one connection a tag names one grant.
 */
export type TokenTags = readonly [tagA: number, tagB: number];

/** Tokens from here on are recorded in a holder row instead (they do not fit in two pieces). */
export const TOKEN_LOCK_LIMIT = 1n << 62n;

const MASK30 = 0x3fffffffn;

/** The token-lock tags of advisory key `key`. */
export function tokenTags(key: bigint): TokenTags {
  return [Number((key >> 32n) & MASK30) * 2, Number(key & MASK30) * 2 + 1];
}
