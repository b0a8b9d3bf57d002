import type { Holder, PermitHolder, StoredRecord } from "../contract/backend.js";
import type { Guarantees } from "../contract/guarantees.js";
import type { Clock } from "../helpers/clock.js";
import type { CoordinatorEventHub } from "./events.js";
import type { ForceReleaseRequest, ForceReleaseResult } from "./force-release.js";
import type { InspectionAccess } from "./inspection.js";
import type { Lock } from "./lock.js";
import type { AcquireOptions, Mode, ResolvedAcquire, TryAcquireOptions } from "./options.js";
import type { Permit, PermitRequest } from "./permit.js";

/**
 * The lock API a recipe builds on: the coordinator's own public lock methods, with their
 * documented behaviour (see `Coordinator`).
 */
export interface LockClient {
  readonly ownerId: string;
  readonly mode: Mode;
  readonly ttlMs: number;
  acquire(name: string, options?: AcquireOptions): Promise<Lock>;
  tryAcquire(name: string, options?: TryAcquireOptions): Promise<Lock | null>;
  holder(name: string): Promise<Holder | null>;
  watch(name: string, options?: { signal?: AbortSignal }): AsyncIterable<Holder | null>;
}

/** Durable records, as a coordinator reaches them through its live session. */
export interface RecordAccess {
  read(key: string): Promise<StoredRecord | null>;
  write(key: string, value: string, expected: string | null): Promise<string | null>;
}

/**
 * The one extension point of the kernel: everything a recipe gets beyond the public lock
 * API. A recipe is a function or class of `recipes/` that takes a `RecipeHost`; it imports
 * from the kernel only through `kernel/index.ts`, emits its own events on `events`, reports
 * what nobody awaits through `report`, and registers what must stop with the coordinator
 * through `track`.
 */
export interface RecipeHost {
  /** The coordinator's lock API. */
  readonly locks: LockClient;
  /** The coordinator's clock, resolved once: every recipe runs on the same one. */
  readonly clock: Clock;
  /** The coordinator's events: a recipe emits its own events here. */
  readonly events: CoordinatorEventHub;
  /**
   * Reports an error nobody awaits (a `backgroundError` event, which the logger also gets);
   * `during` says what was being done.
   */
  report(error: unknown, during: string): void;
  /** Throws `CoordinatorClosedError` once the coordinator is closing. */
  assertOpen(): void;
  /**
   * Registers a recipe that runs until it is stopped (a campaign, a balancing loop, a
   * schedule): the coordinator's `close()` calls `close` before any lock is released, so an
   * election's `onRevoked` runs while the store is still reachable. Returns the function the
   * recipe calls once it stopped on its own.
   */
  track(close: () => Promise<void>): () => void;
  /** What the backend guarantees, when known without I/O (an instance, an imported adapter). */
  knownGuarantees(): Guarantees | undefined;
  /** The backend's kind (`redis`, `memory`, ...) for error messages, or the URL's scheme. */
  backendKind(): string;
  /**
   * Acquires `request` permits of `name` through the acquire pipeline (the backend's
   * `acquirePermits`): as `acquire` does, or as `tryAcquire` does with `orNull`.
   */
  acquirePermits(
    name: string,
    options: ResolvedAcquire,
    request: PermitRequest,
    orNull: boolean,
  ): Promise<Permit | null>;
  /** The granted permits of `name`, a read bounded like `holder()`. */
  permitHolders(name: string): Promise<PermitHolder[]>;
  /**
   * The store's durable records through the live session, each call bounded by one TTL;
   * rejects with `ConfigError` when the backend keeps none.
   */
  records(signal: AbortSignal | undefined): Promise<RecordAccess>;
  /**
   * The store's keys, their holders and waiters, for operators (`coordinator.list()` and
   * `inspect()`): each call bounded by one TTL and ended by `signal`; rejects with
   * `ConfigError` when the backend does not declare `inspection`.
   */
  inspection(signal: AbortSignal | undefined): Promise<InspectionAccess>;
  /** Frees a grant of lock or permit key `name` at the store; see `Coordinator.forceRelease`. */
  forceRelease(name: string, request: ForceReleaseRequest): Promise<ForceReleaseResult>;
}
