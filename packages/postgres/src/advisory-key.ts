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
  const digest = createHash("sha256").update(namespace).update("\u0000").update(name).digest();
  return digest.readBigInt64BE(0);
}
