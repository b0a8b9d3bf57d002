/**
 * The service pattern: one client object (one coordinator, one raw connection, one pool, one
 * peer instance) in one process, serving C concurrent callers, each looping acquire + release
 * over distinct keys, keys drawn at random from 1,000, or one hot key. Every variant runs the
 * same cells, interleaved: for each (keys, C) cell the variants run one after another, in one
 * order in the first round and the opposite order in the second, so drift of the machine hits
 * each alike.
 */
import { setMaxListeners } from "node:events";
import { type LatencySection, type Role, row } from "./results.js";
import {
  addDelta,
  clientCpuSince,
  emptyTotals,
  idleRate,
  type ServerMeter,
  type ServerReading,
  serverCost,
  subtractIdle,
} from "./server-meter.js";
import { summarise } from "./stats.js";

/** How the callers pick their keys. */
export type KeyMode = "distinct" | "random" | "hot";

/** Every key mode, in the report's order. */
export const KEY_MODES: readonly KeyMode[] = ["distinct", "random", "hot"];

/** Concurrent callers of one client object. */
export const SERVICE_CALLERS: readonly number[] = [1, 16, 256];

/** Keys drawn from in the random mode. */
export const RANDOM_KEYS = 1_000;

/** One lock name of a cell: `name` for stores that take strings, `id` for those that take numbers. */
export interface ServiceKey {
  readonly name: string;
  /** A positive integer unique to `name` within the run (PostgreSQL advisory lock keys). */
  readonly id: number;
}

/** One variant's client object, opened once and shared by all its callers. */
export interface ServiceClient {
  /**
   * Acquire (waiting or retrying until it holds) then release `key`. `signal` aborts at the end
   * of the cell: a wait or a retry loop then gives up (what is in flight is not counted).
   */
  op(key: ServiceKey, signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** A variant of the service-pattern bench. */
export interface ServiceVariant {
  readonly name: string;
  readonly role: Role;
  open(): Promise<ServiceClient>;
  /** The cells this variant runs (default: all), e.g. a peer that opens a connection per lock. */
  readonly callers?: readonly number[];
  readonly modes?: readonly KeyMode[];
  /** The variant's own server meter (default: the bench's). */
  readonly server?: ServerMeter;
}

/** What a backend's bench hands to {@link measureService}. */
export interface ServiceBench {
  readonly variants: readonly ServiceVariant[];
  /** How the variants connect and retry, one sentence each. */
  readonly notes: readonly string[];
  /**
   * The variants run again with P processes (see {@link measureServiceProcesses}), by name:
   * the floor and the coordinator, where a process can open them on its own.
   */
  readonly processVariants?: readonly string[];
}

/** The samples and costs of one variant's cells, summed over rounds. */
interface CellTotals {
  samples: number[];
  elapsedMs: number;
  cpuUs: number;
  errors: number;
  server: ReturnType<typeof emptyTotals> | undefined;
}

/** Options of {@link measureService}. */
export interface ServiceOptions {
  readonly callers?: readonly number[];
  readonly modes?: readonly KeyMode[];
  /** Measuring time of one cell of one variant per round, ms. Default 1,000. */
  readonly cellMs?: number;
  /** Rounds (in alternate orders). Default 2. */
  readonly rounds?: number;
  /** The server time of every variant without a meter of its own. */
  readonly server?: ServerMeter;
  /** Time over which each meter's idle rate is read, then taken off every cell. Default 0. */
  readonly idleMs?: number;
}

/** The cell's measuring time: `BATON_BENCH_SERVICE_MS`, or `fallback`. */
export function serviceCellMs(fallback = 1_000): number {
  const v = Number(process.env.BATON_BENCH_SERVICE_MS);
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

/** The unmeasured warm-up before a group of cells: half a cell (every caller finishes one op). */
export function warmUpMs(cellMs: number): number {
  return Math.max(100, Math.round(cellMs / 2));
}

/** Acquire + release calls each caller makes in a measured cell, at least (see groupCellMs). */
const CALLS_PER_CELL = 10;
/** The longest a cell is made (see groupCellMs). */
const MAX_CELL_MS = 5_000;

/**
 * The measured length of a group's cells: `cellMs`, or longer where a call takes so long that
 * a caller would make fewer than ten in it (by the slowest variant's p50 in the group's
 * warm-up), at most 5 s. A cell counts the calls under way when its time is up and runs until
 * they end, so a cell of two or three calls per caller (a slow store at C = 256) times mostly
 * its slowest caller's last call, and a variant whose slow calls are slower loses more than
 * its calls do.
 */
export function groupCellMs(cellMs: number, warmUps: readonly { samples: number[] }[]): number {
  let p50 = 0;
  for (const w of warmUps) {
    if (w.samples.length > 0) p50 = Math.max(p50, summarise(w.samples, 0).p50);
  }
  return Math.min(MAX_CELL_MS, Math.max(cellMs, Math.ceil((p50 * CALLS_PER_CELL) / 100) * 100));
}

/**
 * A pause that lets a retrying caller give the holder its turn; with `signal`, throws once the
 * cell has ended instead, so a retry loop stops there.
 */
export async function pause(ms: number, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** The key of caller `caller` in `mode` for variant number `v` (names and ids apart per variant). */
export function keyOf(v: number, mode: KeyMode, caller: number, keys = RANDOM_KEYS): ServiceKey {
  const k =
    mode === "distinct" ? caller : mode === "hot" ? 0 : Math.floor(Math.random() * keys) + 1;
  const m = mode === "distinct" ? 0 : mode === "random" ? 1 : 2;
  return { name: `svc${v}/${mode}/${k}`, id: 1 + v * 1_000_000 + m * 100_000 + k };
}

/** One cell's raw figures (one process). */
export interface CellResult {
  readonly samples: number[];
  readonly elapsedMs: number;
  readonly cpuUs: number;
  readonly errors: number;
  readonly firstError?: string;
}

/**
 * Runs `callers` loops of `client.op` for `ms`: each caller takes its key by `mode` and loops
 * acquire + release until the time is up. A failed op is counted (and the caller pauses 1 ms).
 */
export async function runCell(
  client: ServiceClient,
  v: number,
  mode: KeyMode,
  callers: number,
  ms: number,
  /** The first caller's number (callers in other processes have the numbers before it). */
  firstCaller = 0,
): Promise<CellResult> {
  const samples: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + ms;
  const end = new AbortController();
  // Every caller of the cell shares this signal, and a client may listen on it once per
  // caller's wait: more than that is a leak, which Node still reports.
  setMaxListeners(callers + 1, end.signal);
  const timer = setTimeout(() => end.abort(new Error("the cell ended")), ms);
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      while (performance.now() < until) {
        const key = keyOf(v, mode, firstCaller + caller);
        const s = performance.now();
        try {
          await client.op(key, end.signal);
          samples.push(performance.now() - s);
        } catch (error) {
          if (end.signal.aborted) break;
          errors++;
          firstError ??= error instanceof Error ? error.message : String(error);
          await pause(1);
        }
      }
    }),
  );
  clearTimeout(timer);
  const elapsedMs = performance.now() - started;
  return {
    samples,
    elapsedMs,
    cpuUs: clientCpuSince(cpu0),
    errors,
    ...(firstError === undefined ? {} : { firstError }),
  };
}

const MODE_TITLE: Record<KeyMode, string> = {
  distinct: "distinct keys (one per caller)",
  random: `keys drawn at random from ${RANDOM_KEYS.toLocaleString("en-US")}`,
  hot: "one hot key",
};

/** The title of a service cell's section (the report and the summary find sections by it). */
export function serviceTitle(mode: KeyMode, callers: number, processes = 1): string {
  return processes === 1
    ? `service pattern, C = ${callers}, ${MODE_TITLE[mode]}`
    : `service pattern, ${processes} processes, C = ${callers} in all, ${MODE_TITLE[mode]}`;
}

/**
 * The service-pattern sections: one per (key mode, C), each with a row per variant (locks/s,
 * p50 and p99 of one acquire + release, client CPU and server time per lock).
 */
export async function measureService(
  bench: ServiceBench,
  options: ServiceOptions = {},
): Promise<LatencySection[]> {
  const callersList = options.callers ?? SERVICE_CALLERS;
  const modes = options.modes ?? KEY_MODES;
  const cellMs = options.cellMs ?? serviceCellMs();
  const rounds = options.rounds ?? 2;
  const variants = bench.variants;
  const meterOf = (v: ServiceVariant) => v.server ?? options.server;
  const clients: ServiceClient[] = [];
  const sections: LatencySection[] = [];
  try {
    for (const v of variants) clients.push(await v.open());
    // Warm-up: every variant's path compiled, every connection open.
    for (const [i, v] of variants.entries()) {
      const c = Math.min(16, Math.max(...(v.callers ?? [16])));
      await runCell(clients[i] as ServiceClient, i, "random", c, 300);
    }
    const idle = new Map<ServerMeter, ServerReading>();
    if ((options.idleMs ?? 0) > 0) {
      for (const meter of new Set(variants.map(meterOf))) {
        if (meter) idle.set(meter, await idleRate(meter, options.idleMs as number));
      }
    }
    for (const mode of modes) {
      for (const callers of callersList) {
        const runs = variants
          .map((v, i) => ({ v, i }))
          .filter(
            ({ v }) =>
              (v.callers ?? callersList).includes(callers) && (v.modes ?? modes).includes(mode),
          );
        const totals = new Map<number, CellTotals>(
          runs.map(({ i, v }) => [
            i,
            {
              samples: [],
              elapsedMs: 0,
              cpuUs: 0,
              errors: 0,
              server: meterOf(v) ? emptyTotals() : undefined,
            },
          ]),
        );
        const errors: string[] = [];
        // Warm-up at this cell's keys and callers, not measured: each caller's key taken once
        // and the client's connections for this many callers open. Without it the first cell at
        // a new number of callers times opening them (on an HTTP store, one socket per caller)
        // and the first use of each key, at most one or two locks per caller when a lock takes
        // a few hundred ms.
        const warmUps: CellResult[] = [];
        for (const { i } of runs) {
          warmUps.push(
            await runCell(clients[i] as ServiceClient, i, mode, callers, warmUpMs(cellMs)),
          );
        }
        const ms = groupCellMs(cellMs, warmUps);
        for (let round = 0; round < rounds; round++) {
          const order = round % 2 === 0 ? runs : [...runs].reverse();
          for (const { v, i } of order) {
            const meter = meterOf(v);
            const before = meter ? await meter.read() : undefined;
            const cell = await runCell(clients[i] as ServiceClient, i, mode, callers, ms);
            const t = totals.get(i) as CellTotals;
            // A loop: a spread of a fast store's cell (300,000 samples) overflows the stack.
            for (const sample of cell.samples) t.samples.push(sample);
            t.elapsedMs += cell.elapsedMs;
            t.cpuUs += cell.cpuUs;
            t.errors += cell.errors;
            if (cell.firstError !== undefined && cell.errors > 0) {
              errors.push(`${v.name}: ${cell.errors} failed ops (${cell.firstError})`);
            }
            if (meter && before && t.server) {
              addDelta(t.server, before, await meter.read());
              const rate = idle.get(meter);
              if (rate) subtractIdle(t.server, rate, cell.elapsedMs);
            }
          }
        }
        sections.push(
          serviceSection(
            mode,
            callers,
            1,
            runs.map(({ v, i }) => {
              const t = totals.get(i) as CellTotals;
              const meter = meterOf(v);
              return {
                name: v.name,
                role: v.role,
                totals: t,
                ...(meter && t.server ? { server: meter } : {}),
              };
            }),
            [...bench.notes, ...errors],
            cellMs,
            rounds,
            ms,
          ),
        );
      }
    }
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
  }
  return sections;
}

/** A section from each variant's summed cells. */
export function serviceSection(
  mode: KeyMode,
  callers: number,
  processes: number,
  measured: readonly {
    name: string;
    role: Role;
    totals: Omit<CellTotals, "server"> & { server?: CellTotals["server"] };
    server?: ServerMeter;
  }[],
  notes: readonly string[],
  cellMs: number,
  rounds: number,
  /** The group's measured cell length (groupCellMs), when longer than `cellMs`. */
  measuredMs = cellMs,
): LatencySection {
  const rows = measured.map((m) => {
    const s = summarise(m.totals.samples, m.totals.elapsedMs);
    const ops = Math.max(1, s.count);
    return row(m.name, m.role, s, {
      clientCpuUs: m.totals.cpuUs / ops,
      ...(m.server && m.totals.server
        ? { server: serverCost(m.server, m.totals.server, ops) }
        : {}),
    });
  });
  const floor = rows.find((r) => r.role === "floor");
  return {
    figure: processes === 1 ? "service" : "service-processes",
    title: serviceTitle(mode, callers, processes),
    ...(floor
      ? { floor: { label: floor.variant, p50: floor.p50, opsPerSec: floor.opsPerSec } }
      : {}),
    opsLabel: "locks/s",
    opsVsFloor: true,
    costLabel: "per lock",
    rows,
    notes: [
      `${rounds} rounds of ${measuredMs} ms per variant, in opposite orders, after an unmeasured warm-up of ${warmUpMs(cellMs)} ms per variant at the same keys and callers; p50/p99 of one acquire + release, waits and retries for a taken key included`,
      ...(measuredMs > cellMs
        ? [
            `cells of ${measuredMs} ms instead of ${cellMs}: ${CALLS_PER_CELL} calls per caller at the slowest variant's p50 in the warm-up (at most ${MAX_CELL_MS} ms), since a cell runs until the calls under way at its end finish`,
          ]
        : []),
      ...notes,
    ],
    service: { mode, callers, processes },
  };
}
