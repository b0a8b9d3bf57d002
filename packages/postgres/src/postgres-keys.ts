import { createHash } from "node:crypto";

/*
 * Every name Baton uses in PostgreSQL, built here:
 *
 * - a lock is a session-level advisory lock on one bigint key ({@link advisoryKey}; in
 *   `pg_locks` its halves are `classid` and `objid`, `objsubid` 1);
 * - the rest live in PostgreSQL's two-integer advisory key space (`objsubid` 2): a key's
 *   queue key ({@link queueKey}, first integer negative) and the token locks of a session
 *   ((tag, offset), both non-negative: {@link tokenTag}, token-locks.ts), so the two never meet;
 * - the schema's tables and sequence ({@link schemaNames}), and the advisory key that
 *   serialises migrations ({@link MIGRATION_KEY});
 * - durable records (what `runOnce` keeps): one row of the schema's records table per record,
 *   keyed by the record's key as core names it, apart from every advisory key;
 * - permit keys (semaphores, read-write locks): rows keyed by namespace and name, apart from
 *   every advisory key; a session that holds or waits for permits holds one session-level
 *   advisory lock on its random liveness key (see permit-functions.ts), in the bigint key
 *   space of locks, where a clash has the odds of two lock names hashing alike.
 */

/**
 * The 64-bit advisory lock key of `name` inside `namespace`: the first 8 bytes of
 * SHA-256(namespace, NUL, name), read as a signed big-endian integer (PostgreSQL's `bigint`).
 *
 * Distinct names collide with probability about n² / 2⁶⁵ for n names in one database
 * (one in 37 million for a million names). Colliding names share one lock: they exclude each
 * other, they never both hold it.
 */
export function advisoryKey(namespace: string, name: string): bigint {
  // Hot path: see docs/hot-path.md, "PostgreSQL".
  const id = `${namespace}\u0000${name}`;
  const known = recent.get(id);
  if (known !== undefined) return known;
  const key = createHash("sha256").update(id).digest().readBigInt64BE(0);
  if (recent.size >= RECENT_MAX) recent.clear();
  recent.set(id, key);
  return key;
}

/** Keys computed lately (a deterministic function, so a plain bounded memo is safe). */
const recent = new Map<string, bigint>();
const RECENT_MAX = 4_096;

/**
 * The queue key of advisory key `key`: the same 64 bits as the two 32-bit halves of
 * PostgreSQL's two-integer advisory form (`pg_advisory_lock(int, int)`), a key space of its
 * own (`objsubid` 2 in `pg_locks`), with the sign bit of the first half set. So a queue key
 * never collides with any lock key, nor with a token lock (whose first half is never
 * negative: see {@link tokenTag}); two names share a queue when they share a lock (or differ
 * in the key's top bit only). Waiter connections hold it only to take turns (see
 * key-waits.ts); it never decides who holds a lock.
 */
export function queueKey(key: bigint): readonly [number, number] {
  return [Number(BigInt.asIntN(32, (key >> 32n) | 0x80000000n)), Number(BigInt.asIntN(32, key))];
}

/**
 * The tag of a lock key's token lock (see token-locks.ts): the first integer of the token
 * lock (tag, offset) in PostgreSQL's two-integer advisory key space. A non-negative int4, so
 * `classid` in `pg_locks` reads it back, and never a queue key's (negative) first integer.
 */
export type TokenTag = number;

const MASK31 = 0x7fffffffn;

/** The token-lock tag of advisory key `key`: its low 31 bits (a SHA-256 prefix: a 31-bit hash). */
export function tokenTag(key: bigint): TokenTag {
  return Number(key & MASK31);
}

/** Names of Baton's schema objects, quoted for SQL text. */
export interface SchemaNames {
  readonly schema: string;
  /** The holder rows of grants whose token is not kept in a token lock, by lock key. */
  readonly holders: string;
  /** Owner of each connection that runs a Baton session, by backend pid (see holder()). */
  readonly sessions: string;
  /** The token sequence. */
  readonly tokens: string;
  /** Durable records by key (see postgres-records.ts); a logged table, unlike the two above. */
  readonly records: string;
  /** Row leases (`locks: "lease"`, postgres-lease-session.ts): one row per held lock. */
  readonly leases: string;
  /** Row-lease sessions: one row per Baton session, its expiry on the server's clock. */
  readonly leaseSessions: string;
  /** Permit entries (semaphores, read-write locks): one row per holder or waiter. */
  readonly permits: string;
  /** One row per permit key: its limit and what its entries hold and ask for in all. */
  readonly permitQueues: string;
  /** The newest write token of each permit key (logged: kept as long as the tokens' order). */
  readonly permitTokens: string;
  /**
   * Lock names of the advisory mode by holding connection and advisory key (see
   * postgres-inspection.ts): what an operator's list of locks reads, advisory keys being hashes.
   */
  readonly lockNames: string;
  /** Forced releases of the advisory mode, by the holding connection's pid, for its renewal. */
  readonly revocations: string;
  /** Forced releases of the row-lease mode, by session, for its renewal. */
  readonly leaseRevocations: string;
}

/** The quoted names of the objects in `quotedSchema` (a schema name quoted for SQL text). */
export function schemaNames(quotedSchema: string): SchemaNames {
  return {
    schema: quotedSchema,
    holders: `${quotedSchema}."holders"`,
    sessions: `${quotedSchema}."sessions"`,
    tokens: `${quotedSchema}."token_seq"`,
    records: `${quotedSchema}."records"`,
    leases: `${quotedSchema}."leases"`,
    leaseSessions: `${quotedSchema}."lease_sessions"`,
    permits: `${quotedSchema}."permits"`,
    permitQueues: `${quotedSchema}."permit_queues"`,
    permitTokens: `${quotedSchema}."permit_tokens"`,
    lockNames: `${quotedSchema}."lock_names"`,
    revocations: `${quotedSchema}."revocations"`,
    leaseRevocations: `${quotedSchema}."lease_revocations"`,
  };
}

/**
 * The channel a schema's permit grants are announced on (`NOTIFY`; see permit-functions.ts):
 * `baton_permits_` and 12 hex digits of SHA-256 of the schema's quoted name, so the sessions of
 * one schema hear only its own grants.
 */
export function permitChannel(quotedSchema: string): string {
  return `baton_permits_${createHash("sha256").update(quotedSchema).digest("hex").slice(0, 12)}`;
}

/** Fixed advisory key that serialises concurrent migrations (SHA-256 of "baton:migrate"). */
export const MIGRATION_KEY = "6965977949498628371";
