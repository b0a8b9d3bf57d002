import { type Cost, type Figure, type LatencySection, type Role, row } from "./results.js";
import {
  addDelta,
  clientCpuSince,
  emptyTotals,
  idleRate,
  type ServerMeter,
  type ServerReading,
  type ServerTotals,
  serverCost,
  subtractIdle,
} from "./server-meter.js";
import { type Summary, summarise } from "./stats.js";

/** One thing to measure: `op` is timed; `setup`/`teardown` are not. */
export interface Variant {
  readonly name: string;
  /** What the row stands for in the report; default "reference". */
  readonly role?: Role;
  setup?(): Promise<void>;
  op(): Promise<void>;
  teardown?(): Promise<void>;
  /** The server time of this variant (default: {@link InterleaveOptions.server}). */
  readonly server?: ServerMeter;
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
  /** The server time of every variant without a meter of its own. */
  readonly server?: ServerMeter;
  /**
   * Time (ms) over which each meter's idle rate (the servers' own background work: heartbeats,
   * timers) is read before the rounds and then taken off every round in proportion to its
   * length. Default 0: nothing taken off (a meter that counts only requests).
   */
  readonly idleMs?: number;
}

/** One variant's latency summary and, over the measured rounds only, its cost per operation. */
export type Measured = Summary & Cost;

/**
 * Measures variants interleaved (A B B A ...) so drift of a shared, noisy machine hits each
 * alike. Returns one summary per variant, in the order given.
 */
export async function interleave(
  variants: readonly Variant[],
  options: InterleaveOptions = {},
): Promise<Map<string, Measured>> {
  const warmup = options.warmup ?? 200;
  const rounds = options.rounds ?? 6;
  const perRound = options.perRound ?? 300;
  const maxMs = options.maxMs ?? 60_000;
  const samples = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const elapsed = new Map<string, number>(variants.map((v) => [v.name, 0]));
  const cpu = new Map<string, number>(variants.map((v) => [v.name, 0]));
  const server = new Map<string, ServerTotals>(variants.map((v) => [v.name, emptyTotals()]));
  const meterOf = (v: Variant) => v.server ?? options.server;
  const idle = new Map<ServerMeter, ServerReading>();
  for (const v of variants) await v.setup?.();
  try {
    for (const v of variants) for (let i = 0; i < warmup; i++) await v.op();
    if ((options.idleMs ?? 0) > 0) {
      for (const meter of new Set(variants.map(meterOf))) {
        if (meter) idle.set(meter, await idleRate(meter, options.idleMs as number));
      }
    }
    const started = performance.now();
    for (let round = 0; round < rounds; round++) {
      if (round > 0 && performance.now() - started > maxMs) break;
      const order = round % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        const list = samples.get(v.name) as number[];
        const meter = meterOf(v);
        const before = meter ? await meter.read() : undefined;
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        for (let i = 0; i < perRound; i++) {
          const s = performance.now();
          await v.op();
          list.push(performance.now() - s);
        }
        const roundMs = performance.now() - t0;
        cpu.set(v.name, (cpu.get(v.name) as number) + clientCpuSince(cpu0));
        elapsed.set(v.name, (elapsed.get(v.name) as number) + roundMs);
        if (meter && before) {
          const totals = server.get(v.name) as ServerTotals;
          addDelta(totals, before, await meter.read());
          const rate = idle.get(meter);
          if (rate) subtractIdle(totals, rate, roundMs);
        }
      }
    }
  } finally {
    for (const v of variants) await v.teardown?.();
  }
  return new Map(
    variants.map((v) => {
      const list = samples.get(v.name) as number[];
      const meter = meterOf(v);
      const measured: Measured = {
        ...summarise(list, elapsed.get(v.name) as number),
        clientCpuUs: (cpu.get(v.name) as number) / list.length,
        ...(meter
          ? { server: serverCost(meter, server.get(v.name) as ServerTotals, list.length) }
          : {}),
      };
      return [v.name, measured];
    }),
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
  results: Map<string, Measured>,
  notes: readonly string[],
): LatencySection {
  const rows = variants.map((v) => {
    const m = results.get(v.name) as Measured;
    return row(v.name, v.role ?? "reference", m, m);
  });
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
