import { ConfigError, type Lock } from "@baton/core";

/**
 * The token to record for `lock`: its fencing token, or `0n` on a backend whose guarantees
 * declare fencing "none" (such a lock has no token, and reading it throws a `ConfigError`).
 * Histories of such backends are checked without token order.
 */
export function recordedToken(lock: Lock): bigint {
  try {
    return lock.token;
  } catch (error) {
    if (error instanceof ConfigError && error.field === "token") return 0n;
    throw error;
  }
}
