/** Latency summary of one variant, in milliseconds. */
export interface Summary {
  readonly count: number;
  readonly opsPerSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
}

/** The `q` quantile (0..1) of sorted samples, nearest-rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Summarises latency samples (ms) taken back to back over `elapsedMs`. */
export function summarise(samples: readonly number[], elapsedMs: number): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const total = samples.reduce((a, b) => a + b, 0);
  return {
    count: samples.length,
    opsPerSec: elapsedMs > 0 ? (samples.length * 1_000) / elapsedMs : Number.NaN,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    mean: samples.length > 0 ? total / samples.length : Number.NaN,
  };
}
