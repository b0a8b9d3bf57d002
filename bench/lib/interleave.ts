import {
  type CoreShare,
  type Cost,
  type Figure,
  type LatencySection,
  type Role,
  row,
} from "./results.js";
import {
  addDelta,
  clientCpuSince,
  emptyTotals,
  idleRate,
  mainThreadCpuUs,
  type ServerMeter,
  type ServerReading,
  type ServerTotals,
  serverCost,
  subtractIdle,
} from "./server-meter.js";
import { quantile, type Summary, summarise } from "./stats.js";

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
  /**
   * Rounds; each round runs every variant once, in an order that moves every variant through
   * every place in turn (see {@link roundOrder}). Default 6.
   */
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
export type Measured = Summary &
  Cost & {
    /** Client CPU per operation (us) of each measured round, in the order the rounds ran. */
    readonly roundCpuUs: readonly number[];
    /** The same, of the main thread only (see `mainThreadCpuUs`); empty where unknown. */
    readonly roundMainCpuUs: readonly number[];
  };

/**
 * The order of the variants in round `round`: rotated by one place each round, forwards for
 * `n` rounds, then backwards (rotating the other way) for `n`. Over `2n` rounds every variant
 * runs in every place, after each of its two neighbours in the list, and never twice in a row
 * across two rounds (for three or more variants): with plain A B ... B A the first and last variants ran twice in a
 * row at every round boundary, and measured faster for it.
 */
export function roundOrder<T>(variants: readonly T[], round: number): T[] {
  const n = variants.length;
  const forward = Math.floor(round / n) % 2 === 0;
  const shift = forward ? round % n : (n - (round % n)) % n;
  const rotated = [...variants.slice(shift), ...variants.slice(0, shift)];
  return forward ? rotated : rotated.reverse();
}

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
  const cpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const mainCpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
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
      for (const v of roundOrder(variants, round)) {
        const list = samples.get(v.name) as number[];
        const meter = meterOf(v);
        const before = meter ? await meter.read() : undefined;
        const main0 = mainThreadCpuUs();
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        for (let i = 0; i < perRound; i++) {
          const s = performance.now();
          await v.op();
          list.push(performance.now() - s);
        }
        const roundMs = performance.now() - t0;
        (cpu.get(v.name) as number[]).push(clientCpuSince(cpu0) / perRound);
        const main1 = mainThreadCpuUs();
        if (main0 !== undefined && main1 !== undefined) {
          (mainCpu.get(v.name) as number[]).push((main1 - main0) / perRound);
        }
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
      const roundCpuUs = cpu.get(v.name) as number[];
      const measured: Measured = {
        ...summarise(list, elapsed.get(v.name) as number),
        clientCpuUs: roundCpuUs.reduce((a, b) => a + b, 0) / roundCpuUs.length,
        roundCpuUs,
        roundMainCpuUs: mainCpu.get(v.name) as number[],
        ...(meter
          ? { server: serverCost(meter, server.get(v.name) as ServerTotals, list.length) }
          : {}),
      };
      return [v.name, measured];
    }),
  );
}

/**
 * Core's share from interleaved results: the coordinator's client CPU per operation minus the
 * session's, round by round (the two ran within one round, seconds apart), and the median of
 * those differences. Undefined without both rows or with fewer than 2 rounds.
 *
 * Why not the difference of the two totals: one burst of other work on the machine, or a
 * garbage collection, landing in one variant's round moves its total by tens of microseconds
 * per operation on a store whose operation costs the client a millisecond of CPU; the median
 * of the rounds' differences leaves such rounds out.
 */
export function coreShareOf(
  variants: readonly Variant[],
  results: Map<string, Measured>,
): CoreShare | undefined {
  const byRole = (role: Role) => {
    const v = variants.find((x) => (x.role ?? "reference") === role);
    return v ? results.get(v.name) : undefined;
  };
  const session = byRole("session");
  const coordinator = byRole("coordinator");
  if (!session || !coordinator) return undefined;
  const differences = (pick: (m: Measured) => readonly number[]) => {
    const c = pick(coordinator);
    const s = pick(session);
    const count = Math.min(c.length, s.length);
    return c
      .slice(0, count)
      .map((x, i) => x - (s[i] as number))
      .sort((a, b) => a - b);
  };
  const all = differences((m) => m.roundCpuUs);
  if (all.length < 2) return undefined;
  const main = differences((m) => m.roundMainCpuUs);
  const onMain = main.length === all.length;
  const used = onMain ? main : all;
  return {
    clientCpuUs: quantile(used, 0.5),
    lowUs: quantile(used, 0.25),
    highUs: quantile(used, 0.75),
    rounds: used.length,
    thread: onMain ? "main" : "process",
    ...(onMain ? { processCpuUs: quantile(all, 0.5) } : {}),
  };
}

/**
 * A section from interleaved results: each variant's row in the order given, the `floor` role
 * as the ratio base (ops alike, so time per op is compared too), and core's share, also as a
 * note: `share` when given (see `measureCoreShare`), else from the section's own session and
 * coordinator rows (see {@link coreShareOf}) when both are there.
 */
export function latencySection(
  figure: Figure,
  title: string,
  variants: readonly Variant[],
  results: Map<string, Measured>,
  notes: readonly string[],
  coreShare?: CoreShare,
): LatencySection {
  const rows = variants.map((v) => {
    const m = results.get(v.name) as Measured;
    return row(v.name, v.role ?? "reference", m, m);
  });
  const floor = rows.find((r) => r.role === "floor");
  const share = coreShare ?? coreShareOf(variants, results);
  const signed = (n: number) => `${n >= 0 ? "+" : ""}${n.toFixed(1)}`;
  return {
    figure,
    title,
    ...(floor
      ? { floor: { label: floor.variant, p50: floor.p50, opsPerSec: floor.opsPerSec } }
      : {}),
    rows,
    ...(share ? { coreShare: share } : {}),
    notes: share
      ? [
          ...notes,
          `core's share (coordinator minus ${share.sameSession ? "the same calls made straight to the coordinator's own backend session, in rounds of their own" : "session"}, ${share.thread === "main" ? "the main thread's" : "client"} CPU per op): ${signed(share.clientCpuUs)} us, the median of the ${share.rounds} rounds' differences (middle half ${signed(share.lowUs)} to ${signed(share.highUs)} us)${share.processCpuUs === undefined ? "" : `; the whole process's, every thread: ${signed(share.processCpuUs)} us`}`,
        ]
      : notes,
  };
}
