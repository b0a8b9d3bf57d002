/** What correctness mode passes to {@link Fence.raise}. */
export interface FenceRaiseOptions {
  /**
   * Aborts when the coordinator gives up on this raise (the caller's wait ran out, it was
   * cancelled, or the coordinator closed). A raise given up on must not take effect later:
   * cancel or roll back what is still pending, and let go of its connections.
   */
  readonly signal?: AbortSignal;
  /**
   * The lease length of the lock whose token is raised, in ms. A fence that locks a row while
   * it raises can bound its own waits and idle transactions by it, so a holder paused in the
   * middle of a write does not block the next holder much longer than its lease.
   */
  readonly ttlMs?: number;
}

/**
 * A fence: a store that accepts a write only with a token at least as new as the newest it
 * has seen (a `job_fence` table, say). Correctness mode raises the fence with every new
 * lock's token before user code runs, under the lock's name, so a paused old holder is
 * rejected from then on. A write under any other resource name is not protected by that
 * raise: a fence should refuse it (as `pgFence` does) or the holder raises each such
 * resource itself, before its first write to it.
 */
export interface Fence {
  /**
   * Raises the fence of `resource` to `token`. Rejects with `StaleTokenError` when a greater
   * token was already seen. Raising to the token already stored succeeds (one holder makes
   * many writes with the same token). Fences written before `options` existed may ignore it.
   */
  raise(resource: string, token: bigint, options?: FenceRaiseOptions): Promise<void>;
}
