import { type Figure, type LatencySection, type Role, row } from "./results.js";
import { type Summary, summarise } from "./stats.js";

/** One thing to measure: `op` is timed; `setup`/`teardown` are not. */
export interface Variant {
  readonly name: string;
  /** What the row stands for in the report; default "reference". */
  readonly role?: Role;
  setup?(): Promise<void>;
  op(): Promise<void>;
  teardown?(): Promise<void>;
}

/** Options of {@link interleave}. */
export interface InterleaveOptions {
  /** Untimed operations per variant before measuring. Default 200. */
  readonly warmup?: number;
  /** Rounds; each round runs every variant once, in alternating order (A B, B A, ...). Default 6. */
  readonly rounds?: number;
  /** Timed operations per variant per round. Default 300. */
  readonly perRound?: number;
  /** Stops starting new rounds after this many ms (a bound for slow stores). Default 60000. */
  readonly maxMs?: number;
}

/**
 * Measures variants interleaved (A B B A ...) so drift of a shared, noisy machine hits each
 * alike. Returns one summary per variant, in the order given.
 */
export async function interleave(
  variants: readonly Variant[],
  options: InterleaveOptions = {},
): Promise<Map<string, Summary>> {
  const warmup = options.warmup ?? 200;
  const rounds = options.rounds ?? 6;
  const perRound = options.perRound ?? 300;
  const maxMs = options.maxMs ?? 60_000;
  const samples = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const elapsed = new Map<string, number>(variants.map((v) => [v.name, 0]));
  for (const v of variants) await v.setup?.();
  try {
    for (const v of variants) for (let i = 0; i < warmup; i++) await v.op();
    const started = performance.now();
    for (let round = 0; round < rounds; round++) {
      if (round > 0 && performance.now() - started > maxMs) break;
      const order = round % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        const list = samples.get(v.name) as number[];
        const t0 = performance.now();
        for (let i = 0; i < perRound; i++) {
          const s = performance.now();
          await v.op();
          list.push(performance.now() - s);
        }
        elapsed.set(v.name, (elapsed.get(v.name) as number) + performance.now() - t0);
      }
    }
  } finally {
    for (const v of variants) await v.teardown?.();
  }
  return new Map(
    variants.map((v) => [
      v.name,
      summarise(samples.get(v.name) as number[], elapsed.get(v.name) as number),
    ]),
  );
}

/**
 * A section from interleaved results: each variant's row in the order given, the `floor` role
 * as the ratio base (ops alike, so time per op is compared too).
 */
export function latencySection(
  figure: Figure,
  title: string,
  variants: readonly Variant[],
  results: Map<string, Summary>,
  notes: readonly string[],
): LatencySection {
  const rows = variants.map((v) =>
    row(v.name, v.role ?? "reference", results.get(v.name) as Summary),
  );
  const floor = rows.find((r) => r.role === "floor");
  return {
    figure,
    title,
    ...(floor
      ? { floor: { label: floor.variant, p50: floor.p50, opsPerSec: floor.opsPerSec } }
      : {}),
    rows,
    notes,
  };
}
