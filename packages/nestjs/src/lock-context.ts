import { AsyncLocalStorage } from "node:async_hooks";
import type { LockContext, RunContext } from "@baton/core";

/** The lock of the innermost `@WithLock` method running in this async context. */
export const lockStorage = new AsyncLocalStorage<LockContext>();
/** The slot of the `@RunOnce` method running in this async context. */
export const runStorage = new AsyncLocalStorage<RunContext>();

/**
 * The lock a `@WithLock` method runs under (its fencing `token`, the `signal` aborted when
 * the lock can no longer be trusted, and the `lock`), from anywhere the method's call
 * reaches: the method itself, what it awaits, what it calls. `undefined` outside one. In a
 * `@WithLock` method called from another, the innermost method's lock.
 *
 * @example
 * ```ts
 * @WithLock((id: string) => `account/${id}`)
 * async deposit(id: string, cents: number) {
 *   const { token, signal } = currentLock()!;
 *   await ledger.add(id, cents, { fencingToken: token, signal });
 * }
 * ```
 */
export function currentLock(): LockContext | undefined {
  return lockStorage.getStore();
}

/**
 * The slot a `@RunOnce` method runs (its `job`, `slot`, fencing `token`, `attempt`, and the
 * `signal` aborted when the attempt must stop), from anywhere the method's call reaches.
 * `undefined` outside one.
 */
export function currentRun(): RunContext | undefined {
  return runStorage.getStore();
}
