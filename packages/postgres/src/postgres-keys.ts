import { createHash } from "node:crypto";

/**
 * The 64-bit advisory lock key of `name` inside `namespace`: the first 8 bytes of
 * SHA-256(namespace, NUL, name), read as a signed big-endian integer (PostgreSQL's `bigint`).
 *
 * Distinct names collide with probability about n² / 2⁶⁵ for n names in one database
 * (one in 37 million for a million names). Colliding names share one lock: they exclude each
 * other, they never both hold it.
 */
export function advisoryKey(namespace: string, name: string): bigint {
  // A hash costs several microseconds; the same few names are locked over and over.
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
 * negative: see token-locks.ts); two names share a queue when they share a lock (or differ in
 * the key's top bit only). Waiter connections hold it only to take turns (see key-waits.ts);
 * it never decides who holds a lock.
 */
export function queueKey(key: bigint): readonly [number, number] {
  return [Number(BigInt.asIntN(32, (key >> 32n) | 0x80000000n)), Number(BigInt.asIntN(32, key))];
}
