import { MAX_PERMITS, type PermitHolder } from "../contract/backend.js";
import { checkFunction, checkInt, checkName, checkOptions } from "../helpers/validate.js";
import {
  type AcquireOptions,
  noPermitsError,
  type Permit,
  type RecipeHost,
  type ResolvedAcquire,
  resolveAcquireOptions,
  type TryAcquireOptions,
} from "../kernel/index.js";
import { type LockContext, runUnder } from "./with-lock.js";

/** Options of `coordinator.semaphore()`. */
export interface SemaphoreOptions {
  /**
   * How many permits the semaphore has in all: 1 to 1,000,000. Every process must use the
   * same number for a name: an acquire that asks with another one while anybody holds or
   * waits for the name rejects with a `PermitLimitError`.
   */
  readonly permits: number;
}

/** Options of {@link Semaphore.acquire} and {@link Semaphore.withPermit}. */
export interface PermitAcquireOptions extends AcquireOptions {
  /** How many permits to take at once, 1 to the semaphore's; default 1. */
  readonly permits?: number;
}

/** Options of {@link Semaphore.tryAcquire}. */
export interface PermitTryOptions extends TryAcquireOptions {
  /** How many permits to take at once, 1 to the semaphore's; default 1. */
  readonly permits?: number;
}

/**
 * A semaphore: at most `permits` permits of `name` held at once across every process that
 * uses it. Waiters are served in the order they came where the backend is FIFO, and a
 * request is never overtaken by later ones, so one that takes several permits is not starved
 * by a stream of single-permit requests. Each grant has a fencing token strictly greater than
 * every earlier one of the name.
 *
 * @example
 * const exports = coordinator.semaphore("exports", { permits: 3 });
 * await exports.withPermit(async ({ token, signal }) => {
 *   await runExport({ token, signal }); // at most 3 run at once, cluster-wide
 * });
 */
export interface Semaphore {
  /** The semaphore's name. */
  readonly name: string;
  /** Its permits in all. */
  readonly permits: number;
  /**
   * Takes `options.permits` permits (default 1), waiting up to `waitMs` (default 60 s) for
   * enough to be free. Rejects as `coordinator.acquire` does: `LockTimeoutError`,
   * `LockHeldError` when `waitMs` is 0 and not enough are free, `PermitLimitError`,
   * `ConfigError` for bad input or a backend without semaphores, `BackendUnavailableError`.
   */
  acquire(options?: PermitAcquireOptions): Promise<Permit>;
  /** Tries once: the permits, or `null` when not enough are free. */
  tryAcquire(options?: PermitTryOptions): Promise<Permit | null>;
  /**
   * Runs `fn` holding the permits and returns its result, as `withLock` does: released when
   * `fn` settles; rejects with the `LockLostError` when they were lost while `fn` ran.
   */
  withPermit<T>(
    fn: (context: LockContext) => T | Promise<T>,
    options?: PermitAcquireOptions,
  ): Promise<T>;
  /** The permits held now, as the store sees them, in the order they were granted. */
  holders(): Promise<PermitHolder[]>;
}

const SEMAPHORE_KEYS = ["permits"] as const;
const PERMIT_KEYS = [
  "waitMs",
  "signal",
  "value",
  "ttlMs",
  "warnHeldMs",
  "warnWaitMs",
  "permits",
] as const;
const PERMIT_TRY_KEYS = ["signal", "value", "ttlMs", "warnHeldMs", "permits"] as const;

/** @internal The coordinator's {@link Semaphore}. */
export class SemaphoreHandle implements Semaphore {
  readonly name: string;
  readonly permits: number;
  readonly #host: RecipeHost;

  constructor(host: RecipeHost, name: string, options: SemaphoreOptions) {
    host.assertOpen();
    this.name = checkName(name);
    const o = checkOptions(options, "options", SEMAPHORE_KEYS);
    this.permits = checkInt(o.permits, "permits", 1, MAX_PERMITS);
    this.#host = host;
    assertPermitsSupported(host);
  }

  acquire(options?: PermitAcquireOptions): Promise<Permit> {
    return this.#acquire(options, false) as Promise<Permit>;
  }

  tryAcquire(options?: PermitTryOptions): Promise<Permit | null> {
    return this.#acquire(options, true);
  }

  async withPermit<T>(
    fn: (context: LockContext) => T | Promise<T>,
    options?: PermitAcquireOptions,
  ): Promise<T> {
    checkFunction(fn, "fn");
    return await runUnder(await this.acquire(options), fn, this.#host.report);
  }

  holders(): Promise<PermitHolder[]> {
    return this.#host.permitHolders(this.name);
  }

  #acquire(options: PermitTryOptions | undefined, orNull: boolean): Promise<Permit | null> {
    let resolved: ResolvedAcquire;
    let permits = 1;
    try {
      if (options !== undefined) {
        const { permits: asked, ...rest } = checkOptions(
          options,
          "options",
          orNull ? PERMIT_TRY_KEYS : PERMIT_KEYS,
        );
        if (asked !== undefined) permits = checkInt(asked, "permits", 1, this.permits);
        resolved = resolveAcquireOptions(rest, orNull);
      } else {
        resolved = resolveAcquireOptions(undefined, orNull);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#host.acquirePermits(
      this.name,
      resolved,
      { limit: this.permits, permits, mode: "permit" },
      orNull,
    );
  }
}

/**
 * Throws a `ConfigError` when the backend is known, without I/O, to have no semaphores (its
 * guarantees declare `semaphores: false`).
 */
export function assertPermitsSupported(host: RecipeHost): void {
  const guarantees = host.knownGuarantees();
  if (guarantees !== undefined && !guarantees.semaphores) {
    throw noPermitsError(host.backendKind());
  }
}
