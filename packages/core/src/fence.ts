/**
 * A fence: a store that accepts a write only with a token at least as new as the newest it
 * has seen (a `job_fence` table, say). Correctness mode raises the fence with every new
 * lock's token before user code runs, so a paused old holder is rejected from then on.
 */
export interface Fence {
  /**
   * Raises the fence of `resource` to `token`. Rejects with `StaleTokenError` when a greater
   * token was already seen. Raising to the token already stored succeeds (one holder makes
   * many writes with the same token).
   */
  raise(resource: string, token: bigint): Promise<void>;
}
