import { type PermitHolder, READ_WRITE_LIMIT } from "../contract/backend.js";
import { checkFunction, checkName } from "../helpers/validate.js";
import {
  type AcquireOptions,
  type Permit,
  type PermitRequest,
  type RecipeHost,
  resolveAcquireOptions,
  type TryAcquireOptions,
} from "../kernel/index.js";
import { assertPermitsSupported } from "./semaphore.js";
import { type LockContext, runUnder } from "./with-lock.js";

/**
 * A read-write lock: many readers at once, or one writer. A writer that waits is never
 * overtaken by readers that come after it, so a stream of readers cannot starve it; a held
 * write can be downgraded to a read without a gap ({@link Permit.downgrade}). Every write
 * takes a token strictly greater than every earlier one of the name; a read carries the
 * token of the newest write before it, so a fence can order reads after writes.
 *
 * @example
 * const catalog = coordinator.readWriteLock("catalog");
 * const price = await catalog.withRead(({ token }) => readPrice({ token }));
 * await catalog.withWrite(({ token, signal }) => updatePrices({ token, signal }));
 */
export interface ReadWriteLock {
  /** The lock's name. */
  readonly name: string;
  /**
   * Takes a read lock, waiting up to `waitMs` (default 60 s) while a writer holds or waits.
   * Rejects as `coordinator.acquire` does.
   */
  read(options?: AcquireOptions): Promise<Permit>;
  /** Takes the write lock, waiting up to `waitMs` (default 60 s) for readers and writers. */
  write(options?: AcquireOptions): Promise<Permit>;
  /** Tries once for a read lock: it, or `null` when a writer holds or waits. */
  tryRead(options?: TryAcquireOptions): Promise<Permit | null>;
  /** Tries once for the write lock: it, or `null` when anybody holds or waits. */
  tryWrite(options?: TryAcquireOptions): Promise<Permit | null>;
  /** Runs `fn` under a read lock, as `withLock` does. */
  withRead<T>(fn: (context: LockContext) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
  /** Runs `fn` under the write lock, as `withLock` does. */
  withWrite<T>(fn: (context: LockContext) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
  /** The read and write locks held now, as the store sees them, in the order they were granted. */
  holders(): Promise<PermitHolder[]>;
}

const READ: PermitRequest = { limit: READ_WRITE_LIMIT, permits: 1, mode: "read" };
const WRITE: PermitRequest = { limit: READ_WRITE_LIMIT, permits: READ_WRITE_LIMIT, mode: "write" };

/** @internal The coordinator's {@link ReadWriteLock}. */
export class ReadWriteLockHandle implements ReadWriteLock {
  readonly name: string;
  readonly #host: RecipeHost;

  constructor(host: RecipeHost, name: string) {
    host.assertOpen();
    this.name = checkName(name);
    this.#host = host;
    assertPermitsSupported(host);
  }

  read(options?: AcquireOptions): Promise<Permit> {
    return this.#acquire(READ, options, false) as Promise<Permit>;
  }

  write(options?: AcquireOptions): Promise<Permit> {
    return this.#acquire(WRITE, options, false) as Promise<Permit>;
  }

  tryRead(options?: TryAcquireOptions): Promise<Permit | null> {
    return this.#acquire(READ, options, true);
  }

  tryWrite(options?: TryAcquireOptions): Promise<Permit | null> {
    return this.#acquire(WRITE, options, true);
  }

  async withRead<T>(
    fn: (context: LockContext) => T | Promise<T>,
    options?: AcquireOptions,
  ): Promise<T> {
    checkFunction(fn, "fn");
    return await runUnder(await this.read(options), fn, this.#host.report);
  }

  async withWrite<T>(
    fn: (context: LockContext) => T | Promise<T>,
    options?: AcquireOptions,
  ): Promise<T> {
    checkFunction(fn, "fn");
    return await runUnder(await this.write(options), fn, this.#host.report);
  }

  holders(): Promise<PermitHolder[]> {
    return this.#host.permitHolders(this.name);
  }

  #acquire(
    request: PermitRequest,
    options: AcquireOptions | TryAcquireOptions | undefined,
    orNull: boolean,
  ): Promise<Permit | null> {
    try {
      return this.#host.acquirePermits(
        this.name,
        resolveAcquireOptions(options, orNull),
        request,
        orNull,
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
