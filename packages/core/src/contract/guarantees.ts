import { ConfigError } from "./errors.js";

/**
 * What a backend promises. Declared by each adapter and verified by the conformance suite;
 * groups of the suite that a backend does not declare are skipped, and the skip is printed.
 */
export interface Guarantees {
  /**
   * Fencing tokens:
   * - `monotonic`: every later grant of a key has a strictly greater token, through failures
   *   of the store (consensus-backed counters, or an in-process counter for `memory`).
   * - `single-node`: strictly greater while the one node keeps its data; a failover to a
   *   lagging replica can hand out a smaller token (what a counter lost with the data does is
   *   the adapter's to say: Redis starts it again from the server's clock).
   * - `none`: grants carry no order (Redlock). A lock then has no token: reading `lock.token`
   *   throws a `ConfigError`, so it never reaches a fence.
   */
  readonly fencing: "monotonic" | "single-node" | "none";
  /** Waiters are granted the lock in the order they started waiting. */
  readonly fifo: boolean;
  /**
   * How a waiter of another process learns that the lock it waits for was released, on a
   * backend without FIFO: `"poll"` when it looks again from time to time; `"poll-resets"` when
   * it does so and, once it has seen the lock change hands, looks again within 50 ms (its pause
   * starts over at each new holder and grows only while one grant lasts); `"woken"` when the
   * store tells it at the release (it waits in the store, as on a PostgreSQL advisory lock) and
   * asks again within a round trip. A coordinator that takes a name again right after releasing
   * it first holds off so that such a waiter gets its turn: long enough for a poll with
   * `"poll"` (up to 250 ms); as long with `"poll-resets"` when the name was found contended,
   * and otherwise (nobody seen waiting) only as long as such a waiter needs to see the lock
   * free and take it; a few ms with `"woken"`. Absent: `"poll"`.
   */
  readonly waiters?: "poll" | "poll-resets" | "woken";
  /**
   * Where tokens come from: `"per-key"` when each key has a counter of its own, raised by one
   * per grant of that key, so a grant whose token is more than one above the last grant of the
   * key in this process shows that another process held the key in between; `"shared"` when
   * the keys take their tokens from one counter (a database sequence, a store-wide revision),
   * so only a gap wider than the tokens this process took for other names meanwhile shows
   * another process at work. On a backend without FIFO, the coordinator uses the gap to tell
   * that others want a name it keeps taking (and gives them a turn). Absent: `"shared"`.
   */
  readonly tokenCounter?: "per-key" | "shared";
  /** Grants are agreed by a majority of replicas (Raft, ZAB). */
  readonly consensus: boolean;
  /** Locks exclude other processes and machines, not only this process. */
  readonly crossProcess: boolean;
  /**
   * Sessions keep durable records (`readRecord` / `writeRecord`), which `runOnce` and
   * `schedule` need to remember that a slot is done. Without them both refuse the backend
   * with a `ConfigError`.
   */
  readonly records: boolean;
  /**
   * Semaphores and read-write locks (`acquirePermits`, `permitHolders`, `downgrade`). Without
   * them `coordinator.semaphore()` and `coordinator.readWriteLock()` refuse the backend with
   * a `ConfigError`.
   */
  readonly semaphores: boolean;
  /**
   * Sessions can list and read every key under the backend's prefix (`listKeys`,
   * `inspectKey`): `coordinator.list()` and `coordinator.inspect()`. Without it both refuse
   * the backend with a `ConfigError`. Absent: `false`.
   */
  readonly inspection?: boolean;
  /**
   * What `forceRelease` frees: `"grant"` exactly the grant named (the holder's other locks
   * live on), `"session"` the holder's whole session (every grant of it is revoked; a store
   * whose locks belong to a connection). Absent: force release is not supported and
   * `coordinator.forceRelease()` refuses the backend with a `ConfigError`.
   */
  readonly forceRelease?: "grant" | "session";
  /**
   * The lease lengths the store can grant, when it cannot grant any number of ms: a `ttlMs`
   * must be a multiple of `stepMs` and at least `minMs` (etcd: whole seconds, at least 2 s).
   * `createCoordinator` checks its `ttlMs` against it before any I/O, for a `backend` instance
   * and for a `url` whose adapter is imported. Absent: any `ttlMs` in Baton's own range.
   */
  readonly ttlSteps?: {
    /** A `ttlMs` must be a multiple of this. */
    readonly stepMs: number;
    /** The shortest `ttlMs`. */
    readonly minMs: number;
  };
}

/**
 * Throws `ConfigError` (field `ttlMs`) when `ttlMs` is not a lease length a backend with
 * `guarantees` can grant (see {@link Guarantees.ttlSteps}), saying what to use instead.
 */
export function checkTtlSteps(ttlMs: number, guarantees: Guarantees, kind: string): void {
  const steps = guarantees.ttlSteps;
  if (steps === undefined) return;
  if (ttlMs % steps.stepMs === 0 && ttlMs >= steps.minMs) return;
  throw new ConfigError(
    "ttlMs",
    `the ${kind} backend grants leases in steps of ${steps.stepMs} ms, at least ${steps.minMs} ms; use a multiple of ${steps.stepMs} that is at least ${steps.minMs}, got ${ttlMs}`,
  );
}
