/**
 * The service pattern over P processes: each process one client object (one coordinator, one
 * raw connection), the C callers split evenly over them, so the figures show where the store,
 * not one client process, is the limit. The processes are children (bench/lib/service-worker.ts)
 * started with this process's node options; each cell starts in every process at once.
 */
import { fileURLToPath } from "node:url";
import { BenchChild } from "./child.js";
import type { LatencySection } from "./results.js";
import { addDelta, emptyTotals, idleRate, type ServerMeter, subtractIdle } from "./server-meter.js";
import {
  type CellResult,
  groupCellMs,
  type KeyMode,
  type ServiceBench,
  serviceCellMs,
  serviceSection,
  warmUpMs,
} from "./service.js";

/** Options of {@link measureServiceProcesses}. */
export interface ServiceProcessesOptions {
  readonly backend: string;
  /** The URL the children's variants connect to. */
  readonly url: string;
  readonly bench: ServiceBench;
  /** Processes, one table each. Default [4, 16]. */
  readonly processes?: readonly number[];
  /** Callers in all, split over the processes. Default 256. */
  readonly callers?: number;
  readonly modes?: readonly KeyMode[];
  readonly cellMs?: number;
  readonly rounds?: number;
  readonly server?: ServerMeter;
  readonly idleMs?: number;
}

const WORKER = fileURLToPath(new URL("./service-worker.ts", import.meta.url));

/**
 * One section per (P, key mode): the variants named by the bench's `processVariants`, run in
 * every process at once, interleaved in alternate orders as in one process. Locks/s is every
 * process's locks over the longest process's time; client CPU per lock every process's CPU
 * over every lock.
 */
export async function measureServiceProcesses(
  options: ServiceProcessesOptions,
): Promise<LatencySection[]> {
  const names = options.bench.processVariants ?? [];
  const variants = options.bench.variants
    .map((v, i) => ({ v, i }))
    .filter(({ v }) => names.includes(v.name))
    // The first row is the ratio base when the floor itself is not run in several processes.
    .map(({ v, i }, n, all) =>
      n === 0 && !all.some((x) => x.v.role === "floor")
        ? { v: { ...v, role: "floor" as const }, i }
        : { v, i },
    );
  const callers = options.callers ?? 256;
  const modes = options.modes ?? ["distinct", "random"];
  const cellMs = options.cellMs ?? serviceCellMs();
  const rounds = options.rounds ?? 2;
  const meter = options.server;
  const idle =
    meter && (options.idleMs ?? 0) > 0
      ? await idleRate(meter, options.idleMs as number)
      : undefined;
  const sections: LatencySection[] = [];
  for (const processes of options.processes ?? [4, 16]) {
    const workers = Array.from(
      { length: processes },
      () => new BenchChild<{ cell: CellResult }>(WORKER, [options.backend, options.url]),
    );
    try {
      for (const w of workers) await w.ready();
      const share = (p: number) =>
        Math.floor(callers / processes) + (p < callers % processes ? 1 : 0);
      const run = (v: number, variant: string, mode: KeyMode, ms: number) =>
        Promise.all(
          workers.map(
            async (w, p) =>
              (
                await w.request({
                  op: "run",
                  variant,
                  v,
                  mode,
                  callers: share(p),
                  // Distinct keys stay distinct across the processes.
                  firstCaller: Array.from({ length: p }, (_, q) => share(q)).reduce(
                    (a, b) => a + b,
                    0,
                  ),
                  ms,
                })
              ).cell,
          ),
        );
      // Warm-up: each process opens its clients and compiles their paths.
      for (const { v, i } of variants) await run(i, v.name, "random", 500);
      for (const mode of modes) {
        const totals = new Map(
          variants.map(({ i }) => [
            i,
            { samples: [] as number[], elapsedMs: 0, cpuUs: 0, errors: 0, server: emptyTotals() },
          ]),
        );
        const errors: string[] = [];
        // Unmeasured, at this mode's keys, as measureService warms up before each group.
        const warmUps: { samples: number[] }[] = [];
        for (const { v, i } of variants) {
          const cells = await run(i, v.name, mode, warmUpMs(cellMs));
          warmUps.push({ samples: cells.flatMap((c) => c.samples) });
        }
        const ms = groupCellMs(cellMs, warmUps);
        for (let round = 0; round < rounds; round++) {
          const order = round % 2 === 0 ? variants : [...variants].reverse();
          for (const { v, i } of order) {
            const before = meter ? await meter.read() : undefined;
            const cells = await run(i, v.name, mode, ms);
            const t = totals.get(i) as NonNullable<ReturnType<typeof totals.get>>;
            const elapsed = Math.max(...cells.map((c) => c.elapsedMs));
            for (const c of cells) {
              for (const s of c.samples) t.samples.push(s);
              t.cpuUs += c.cpuUs;
              t.errors += c.errors;
              if (c.errors > 0) errors.push(`${v.name}: ${c.errors} failed ops (${c.firstError})`);
            }
            t.elapsedMs += elapsed;
            if (meter && before) {
              addDelta(t.server, before, await meter.read());
              if (idle) subtractIdle(t.server, idle, elapsed);
            }
          }
        }
        sections.push(
          serviceSection(
            mode,
            callers,
            processes,
            variants.map(({ v, i }) => {
              const t = totals.get(i) as NonNullable<ReturnType<typeof totals.get>>;
              return { name: v.name, role: v.role, totals: t, ...(meter ? { server: meter } : {}) };
            }),
            [
              `${processes} processes, each its own client object per variant, ${callers} callers split evenly over them; client CPU per lock: every process's CPU over every lock`,
              ...options.bench.notes,
              ...errors.slice(0, 3),
            ],
            cellMs,
            rounds,
            ms,
          ),
        );
      }
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  }
  return sections;
}
