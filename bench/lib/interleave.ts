import { type Summary, summarise } from "./stats.js";

/** One thing to measure: `op` is timed; `setup`/`teardown` are not. */
export interface Variant {
  readonly name: string;
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

/** Formats summaries as a table, with each variant's p50 and ops/s as a ratio to `floor`. */
export function formatTable(title: string, results: Map<string, Summary>, floor: string): string {
  const base = results.get(floor);
  const rows = [...results].map(([name, s]) => {
    const ratio = base ? (s.p50 / base.p50).toFixed(2) : "-";
    const opsRatio = base ? (base.opsPerSec / s.opsPerSec).toFixed(2) : "-";
    return [
      name,
      s.opsPerSec.toFixed(0),
      s.p50.toFixed(3),
      s.p99.toFixed(3),
      `${ratio}x`,
      `${opsRatio}x`,
    ];
  });
  const header = ["variant", "ops/s", "p50 ms", "p99 ms", "p50 vs floor", "time/op vs floor"];
  const widths = header.map((h, i) =>
    Math.max(h.length, ...rows.map((r) => (r[i] as string).length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)))
      .join("  ");
  return [
    `\n${title} (floor: ${floor})`,
    line(header),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map(line),
  ].join("\n");
}
