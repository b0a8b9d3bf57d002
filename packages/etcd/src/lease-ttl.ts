import { ConfigError } from "@baton/core";

/** Shortest lease etcd grants with its default timings (election timeout 1 s, heartbeat 100 ms). */
export const MIN_LEASE_SECONDS = 2;

/**
 * The lease length in whole seconds for `ttlMs`. etcd leases are whole seconds and, with
 * default timings, at least 2 s: anything else is a `ConfigError` (field `ttlMs`), never a
 * silent round-up, because deadlines are computed from the TTL the caller asked for.
 */
export function leaseSeconds(ttlMs: number): number {
  if (!Number.isInteger(ttlMs) || ttlMs % 1000 !== 0 || ttlMs < MIN_LEASE_SECONDS * 1000) {
    throw new ConfigError(
      "ttlMs",
      `etcd leases are whole seconds with a ${MIN_LEASE_SECONDS} s minimum under default etcd timings; use a multiple of 1000 that is at least ${MIN_LEASE_SECONDS * 1000}, got ${String(ttlMs)}`,
    );
  }
  return ttlMs / 1000;
}
