import { readdirSync, readFileSync } from "node:fs";

/**
 * Cumulative server time, in microseconds: read before and after each measured round, the
 * difference is the round's share.
 */
export interface ServerReading {
  /** The headline figure (e.g. the server processes' CPU time). */
  readonly total: number;
  /**
   * The same or a related figure by part (a server process, a member, a Redis command). The
   * parts need not sum to the total (a Redis script's time includes the commands it runs,
   * which Redis also counts on their own).
   */
  readonly parts: Readonly<Record<string, number>>;
}

/** Something that reads a server's cumulative time; see {@link ServerReading}. */
export interface ServerMeter {
  /** What the total is, for the report, e.g. "redis-server CPU (schedstat)". */
  readonly source: string;
  /** What the parts are, when they are not the total split up. */
  readonly partsSource?: string;
  read(): Promise<ServerReading>;
}

/** Accumulated server time (total and by part), in microseconds. */
export interface ServerTotals {
  total: number;
  parts: Record<string, number>;
}

/** Empty {@link ServerTotals}. */
export function emptyTotals(): ServerTotals {
  return { total: 0, parts: {} };
}

/** Adds `after - before` to `into` (a part missing before counts from 0). */
export function addDelta(into: ServerTotals, before: ServerReading, after: ServerReading): void {
  into.total += after.total - before.total;
  for (const [part, value] of Object.entries(after.parts)) {
    const delta = value - (before.parts[part] ?? 0);
    if (delta !== 0) into.parts[part] = (into.parts[part] ?? 0) + delta;
  }
}

/** Takes `rate` (per ms, as from {@link idleRate}) times `ms` off `into`. */
export function subtractIdle(into: ServerTotals, rate: ServerReading, ms: number): void {
  into.total -= rate.total * ms;
  for (const [part, r] of Object.entries(rate.parts)) {
    into.parts[part] = (into.parts[part] ?? 0) - r * ms;
  }
}

/** A meter's idle rate, in microseconds per millisecond, read over `ms` of doing nothing. */
export async function idleRate(meter: ServerMeter, ms: number): Promise<ServerReading> {
  const before = await meter.read();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = await meter.read();
  const took = performance.now() - t0;
  const totals = emptyTotals();
  addDelta(totals, before, after);
  return {
    total: totals.total / took,
    parts: Object.fromEntries(Object.entries(totals.parts).map(([p, us]) => [p, us / took])),
  };
}

/**
 * CPU time of processes, in microseconds, from Linux's scheduler statistics: the first field
 * of /proc/<pid>/task/<tid>/schedstat (run time in nanoseconds, exact, unlike the 10 ms ticks
 * of /proc/<pid>/stat), summed over the threads. A thread that ends between two reads takes
 * its time with it; the servers measured here keep their threads. `pids` is asked at every
 * read; each pid is one part, named by `name`. Parts read as 0 off Linux.
 */
export function processCpuMeter(
  source: string,
  pids: () => readonly number[],
  name: (pid: number, index: number) => string = (pid) => `pid ${pid}`,
): ServerMeter {
  return {
    source,
    read: async () => {
      const parts: Record<string, number> = {};
      let total = 0;
      pids().forEach((pid, i) => {
        const us = processCpuUs(pid);
        parts[name(pid, i)] = us;
        total += us;
      });
      return { total, parts };
    },
  };
}

/**
 * CPU time of a process and its children (a PostgreSQL postmaster and its server processes):
 * the root and each live child by schedstat (see {@link processCpuMeter}), plus the children
 * that ended, which the kernel adds to the root's cutime and cstime (in clock ticks of 10 ms,
 * so coarse). Parts: the root, "live children" and "ended children".
 */
export function processTreeCpuMeter(source: string, root: number): ServerMeter {
  return {
    source,
    read: async () => {
      const self = processCpuUs(root);
      let live = 0;
      try {
        const children = readFileSync(`/proc/${root}/task/${root}/children`, "utf8");
        for (const pid of children.trim().split(/\s+/)) if (pid) live += processCpuUs(Number(pid));
      } catch {
        // not Linux, or the root ended
      }
      let ended = 0;
      try {
        const stat = readFileSync(`/proc/${root}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // fields[0] is field 3 (state): cutime and cstime are fields 16 and 17
        ended = (Number(fields[13]) + Number(fields[14])) * CLOCK_TICK_US;
      } catch {
        // as above
      }
      return {
        total: self + live + ended,
        parts: { main: self, "live children": live, "ended children": ended },
      };
    },
  };
}

/** Linux's USER_HZ: /proc's clock ticks are 10 ms. */
const CLOCK_TICK_US = 10_000;

/** One process's CPU time (every thread), in microseconds; 0 where it cannot be read. */
export function processCpuUs(pid: number): number {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  let ns = 0;
  for (const tid of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8");
      ns += Number(stat.slice(0, stat.indexOf(" ")));
    } catch {
      // the thread ended since the directory was listed
    }
  }
  return ns / 1_000;
}

/** Server time per operation, overall and by part, from accumulated totals. */
export interface ServerCost {
  /** What the total is (the meter's source). */
  readonly source: string;
  /** What the parts are, when they are not the total split up. */
  readonly partsSource?: string;
  /** Microseconds per operation. */
  readonly usPerOp: number;
  /** Microseconds per operation by part, largest first (parts under 0.05 us left out). */
  readonly parts: Readonly<Record<string, number>>;
}

/** Totals over `ops` operations of `meter` as a {@link ServerCost}. */
export function serverCost(meter: ServerMeter, totals: ServerTotals, ops: number): ServerCost {
  const parts = Object.entries(totals.parts)
    .map(([part, us]) => [part, us / ops] as const)
    .filter(([, us]) => Math.abs(us) >= 0.05)
    .sort((a, b) => b[1] - a[1]);
  return {
    source: meter.source,
    ...(meter.partsSource === undefined ? {} : { partsSource: meter.partsSource }),
    usPerOp: totals.total / ops,
    parts: Object.fromEntries(parts),
  };
}

/**
 * Client CPU of this process (user + system, every thread: GC and libuv's pool included), in
 * microseconds, since `start` (a `process.cpuUsage()` reading).
 */
export function clientCpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return d.user + d.system;
}

/**
 * CPU time of this process's main thread (the one running JavaScript), in microseconds, from
 * its schedstat (see {@link processCpuMeter}); undefined off Linux. Unlike
 * `process.cpuUsage()` it leaves out V8's and libuv's helper threads (concurrent garbage
 * collection, compilation, the thread pool), whose work lands in whichever variant's round it
 * happens to fall in.
 */
export function mainThreadCpuUs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8");
    return Number(stat.slice(0, stat.indexOf(" "))) / 1_000;
  } catch {
    return undefined;
  }
}
