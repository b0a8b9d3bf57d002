/** Options of {@link backoffMs}. */
export interface BackoffOptions {
  /** The ceiling of the first retry, ms. */
  readonly minMs: number;
  /** The largest ceiling, ms: retries never wait longer. */
  readonly maxMs: number;
}

/**
 * How long to wait before retry number `attempt` (0 for the first): "equal jitter", a random
 * delay between half and all of a ceiling that doubles from `minMs` up to `maxMs`. The
 * randomness keeps replicas that failed together from retrying together.
 *
 * @example
 * for (let attempt = 0; ; attempt++) {
 *   try {
 *     return await call();
 *   } catch {
 *     await sleep(systemClock, backoffMs(attempt, { minMs: 20, maxMs: 1_000 }), signal);
 *   }
 * }
 */
export function backoffMs(attempt: number, options: BackoffOptions): number {
  const ceiling = Math.min(options.maxMs, options.minMs * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
