import { checkFunction, checkName } from "../helpers/validate.js";
import type { AcquireOptions, Lock, LockJson, RecipeHost } from "../kernel/index.js";

/**
 * What `withLock` hands the critical section. `JSON.stringify(context)` writes the token in
 * decimal and the lock (see `Lock.toJSON`), so a context can go into a log line as is.
 */
export interface LockContext {
  /** Aborted the moment the lock can no longer be trusted. Pass it to your I/O. */
  readonly signal: AbortSignal;
  /** The fencing token; send it with every write to a fenced store. */
  readonly token: bigint;
  /** The lock itself. */
  readonly lock: Lock;
}

/** A `withLock` context whose `signal` is built only if `fn` reads it (see Lock.signal). */
class LockContextOf implements LockContext {
  // Hot path: see docs/hot-path.md, "Core".
  readonly lock: Lock;

  constructor(lock: Lock) {
    this.lock = lock;
  }

  /** Read from the lock when asked: a backend without fencing has none (see Lock.token). */
  get token(): bigint {
    return this.lock.token;
  }

  get signal(): AbortSignal {
    return this.lock.signal;
  }

  /** `JSON.stringify(context)`: the token in decimal and the lock (see `Lock.toJSON`). */
  toJSON(): { token?: string; lock: LockJson } {
    const lock = this.lock.toJSON();
    return lock.token === undefined ? { lock } : { token: lock.token, lock };
  }
}

/**
 * Runs `fn` under `lock` and returns its result: the lock is released when `fn` settles; `fn`'s
 * own error wins over a release error (reported as a background error). If the lock was lost
 * while `fn` ran, rejects with the `LockLostError` even when `fn` succeeded.
 *
 * @internal
 */
export async function runUnder<T>(
  lock: Lock,
  fn: (context: LockContext) => T | Promise<T>,
  report: (error: unknown, during: string) => void,
): Promise<T> {
  let result: T;
  try {
    result = await fn(new LockContextOf(lock));
  } catch (error) {
    await lock.release().catch((releaseError: unknown) => {
      report(releaseError, `release after a failed run under "${lock.name}"`);
    });
    throw error;
  }
  const lost = lock.held ? undefined : lock.signal.reason;
  await lock.release();
  if (lost !== undefined) throw lost;
  return result;
}

/**
 * Runs `fn` under the lock `name` and returns its result (see `Coordinator.withLock`).
 * Throws `ConfigError` for bad input before any I/O.
 */
export async function withLock<T>(
  host: RecipeHost,
  name: string,
  fn: (context: LockContext) => T | Promise<T>,
  options: AcquireOptions | undefined,
): Promise<T> {
  checkName(name);
  checkFunction(fn, "fn");
  return await runUnder(await host.locks.acquire(name, options), fn, host.report);
}
