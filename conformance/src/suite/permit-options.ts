import { type BackendPermitOptions, READ_WRITE_LIMIT } from "@baton/core";

/** What a permit options builder lets a test change: any field of `BackendPermitOptions`. */
export type PermitOverrides = Partial<BackendPermitOptions>;

/**
 * Options of `BackendSession.acquirePermits` for `permits` of a semaphore's `limit`:
 * waiting, with a signal that never aborts, unless `overrides` say otherwise.
 */
export function semaphorePermits(
  limit: number,
  permits = 1,
  overrides: PermitOverrides = {},
): BackendPermitOptions {
  return {
    limit,
    permits,
    mode: "permit",
    wait: true,
    signal: new AbortController().signal,
    ...overrides,
  };
}

/**
 * Options of `BackendSession.acquirePermits` for a read-write lock's read (1 of
 * `READ_WRITE_LIMIT`): waiting, with a signal that never aborts, unless `overrides` say
 * otherwise.
 */
export function readPermits(overrides: PermitOverrides = {}): BackendPermitOptions {
  return semaphorePermits(READ_WRITE_LIMIT, 1, { mode: "read", ...overrides });
}

/**
 * Options of `BackendSession.acquirePermits` for a read-write lock's write (all of
 * `READ_WRITE_LIMIT`): waiting, with a signal that never aborts, unless `overrides` say
 * otherwise.
 */
export function writePermits(overrides: PermitOverrides = {}): BackendPermitOptions {
  return semaphorePermits(READ_WRITE_LIMIT, READ_WRITE_LIMIT, { mode: "write", ...overrides });
}
