import { type LatencySection, type Role, type Row, row } from "./results.js";
import {
  addDelta,
  clientCpuSince,
  emptyTotals,
  idleRate,
  type ServerMeter,
  type ServerTotals,
  serverCost,
  subtractIdle,
} from "./server-meter.js";
import { summarise } from "./stats.js";
import { benchCoordinator } from "./telemetry.js";

/** Something that can take the contended lock and hands back its release. */
export interface Contender {
  acquire(): Promise<() => Promise<void>>;
}

/** Options of {@link measureHandoffs}. */
export interface HandoffOptions {
  /** Handoffs measured per group, split over the blocks. */
  readonly handoffs: number;
  /**
   * Handoffs of an untimed block per group before the measured ones, so connections (the
   * waiters' own, opened at their first wait) and compiled code are in place. Default: two per
   * contender.
   */
  readonly warmup?: number;
  /** Blocks per group, run alternately (A B B A ...). Default 4. */
  readonly blocks?: number;
  /** How long each holder holds, so the others are queued when it lets go. Default 2 ms. */
  readonly holdMs?: number;
  /** Pause of a releaser before it waits again. Default 1 ms. */
  readonly pauseMs?: number;
  /** The server time of every group (per grant), read around each block. */
  readonly server?: ServerMeter;
  /** Time (ms) to read the server's idle rate over, taken off each block (as interleave's). Default 0. */
  readonly idleMs?: number;
}

/** Contenders of one variant; each group gets its own lock. */
export interface HandoffGroup {
  readonly name: string;
  readonly role: Role;
  readonly contenders: readonly Contender[];
}

/**
 * Handoff latency with every contender queued on one lock: each loops acquire, hold, release,
 * pause; a sample is the time from one `release()` call to the next grant. With n contenders,
 * up to n - 1 wait at each release. Groups run in alternating blocks so machine drift hits
 * each alike. Rows' ops/s are handoffs per second including the hold. Client CPU and server
 * time are per grant (one acquire + hold + release + pause of one contender, with whatever the
 * waiting contenders do meanwhile), over every grant of the blocks, those after the last
 * sample included.
 */
export async function measureHandoffs(
  groups: readonly HandoffGroup[],
  options: HandoffOptions,
): Promise<Row[]> {
  const blocks = options.blocks ?? 4;
  const perBlock = Math.ceil(options.handoffs / blocks);
  const samples = new Map<string, number[]>(groups.map((g) => [g.name, []]));
  const elapsed = new Map<string, number>(groups.map((g) => [g.name, 0]));
  const grants = new Map<string, number>(groups.map((g) => [g.name, 0]));
  const cpu = new Map<string, number>(groups.map((g) => [g.name, 0]));
  const server = new Map<string, ServerTotals>(groups.map((g) => [g.name, emptyTotals()]));
  const meter = options.server;
  for (const g of groups) {
    await handoffBlock(g.contenders, options.warmup ?? 2 * g.contenders.length, options);
  }
  const idle =
    meter && (options.idleMs ?? 0) > 0
      ? await idleRate(meter, options.idleMs as number)
      : undefined;
  for (let block = 0; block < blocks; block++) {
    const order = block % 2 === 0 ? groups : [...groups].reverse();
    for (const g of order) {
      const before = meter ? await meter.read() : undefined;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const got = await handoffBlock(g.contenders, perBlock, options);
      const blockMs = performance.now() - t0;
      elapsed.set(g.name, (elapsed.get(g.name) as number) + blockMs);
      cpu.set(g.name, (cpu.get(g.name) as number) + clientCpuSince(cpu0));
      if (meter && before) {
        const totals = server.get(g.name) as ServerTotals;
        addDelta(totals, before, await meter.read());
        if (idle) subtractIdle(totals, idle, blockMs);
      }
      grants.set(g.name, (grants.get(g.name) as number) + got.grants);
      (samples.get(g.name) as number[]).push(...got.samples);
    }
  }
  return groups.map((g) => {
    const n = grants.get(g.name) as number;
    return row(
      g.name,
      g.role,
      summarise(samples.get(g.name) as number[], elapsed.get(g.name) as number),
      {
        clientCpuUs: (cpu.get(g.name) as number) / n,
        ...(meter ? { server: serverCost(meter, server.get(g.name) as ServerTotals, n) } : {}),
      },
    );
  });
}

/**
 * The handoff section: rows against the floor's uncontended acquire + release p50 (the
 * target is a handoff within 2 of those).
 */
export function handoffSection(
  waiters: number,
  rows: readonly Row[],
  floor: Row | undefined,
  notes: readonly string[],
): LatencySection {
  return {
    figure: "handoff",
    title: `handoff to the next of ${waiters} waiters (release() -> next holder)`,
    ...(floor ? { floor: { label: `${floor.variant}, uncontended`, p50: floor.p50 } } : {}),
    opsLabel: "handoffs/s",
    costLabel: "per grant",
    rows,
    notes: [
      ...notes,
      "handoffs/s include the 2 ms hold of each holder; client CPU and server time are per grant (one contender's acquire, hold, release and pause, with the waiters' work meanwhile)",
    ],
  };
}

async function handoffBlock(
  contenders: readonly Contender[],
  handoffs: number,
  options: HandoffOptions,
): Promise<{ samples: number[]; grants: number }> {
  const holdMs = options.holdMs ?? 2;
  const pauseMs = options.pauseMs ?? 1;
  const samples: number[] = [];
  let grants = 0;
  let releasedAt: number | undefined;
  let done = false;
  await Promise.all(
    contenders.map(async (c) => {
      while (!done) {
        const release = await c.acquire();
        const now = performance.now();
        grants++;
        if (releasedAt !== undefined) samples.push(now - releasedAt);
        if (samples.length >= handoffs) done = true;
        await sleep(holdMs);
        releasedAt = performance.now();
        await release();
        await sleep(pauseMs);
      }
    }),
  );
  return { samples: samples.slice(0, handoffs), grants };
}

/** What {@link measureCoordinatorHandoffs} measures. */
export interface CoordinatorHandoffs {
  /** The URL every coordinator is created from (each has its own backend). */
  readonly url: string;
  /** The coordinators' TTL, ms. */
  readonly ttlMs: number;
  /** Waiters at each release: one contender more than that. */
  readonly waiters: number;
  /** The coordinators' lock. Default `bench-handoff`. */
  readonly lock?: string;
  /** Groups before the coordinators' (references). */
  readonly before?: readonly HandoffGroup[];
  /** Groups after the coordinators' (peer libraries). */
  readonly after?: readonly HandoffGroup[];
  readonly options: HandoffOptions;
  /** The uncontended floor row the section compares with. */
  readonly floor: Row | undefined;
  readonly notes: readonly string[];
}

/**
 * The handoff section with Baton's row: `waiters + 1` coordinators (owners `handoff-0`, ...)
 * contending with the other groups' contenders (see {@link measureHandoffs}), closed at the end.
 */
export async function measureCoordinatorHandoffs(
  spec: CoordinatorHandoffs,
): Promise<LatencySection> {
  const coordinators = Array.from({ length: spec.waiters + 1 }, (_, i) =>
    benchCoordinator({ url: spec.url, ttlMs: spec.ttlMs, ownerId: `handoff-${i}` }),
  );
  try {
    const rows = await measureHandoffs(
      [
        ...(spec.before ?? []),
        {
          name: "baton coordinator acquire (wait)",
          role: "coordinator",
          contenders: coordinatorContenders(coordinators, spec.lock ?? "bench-handoff"),
        },
        ...(spec.after ?? []),
      ],
      spec.options,
    );
    return handoffSection(spec.waiters, rows, spec.floor, spec.notes);
  } finally {
    await Promise.all(coordinators.map((c) => c.close()));
  }
}

/** Coordinators as contenders for lock `name` (each waits up to a minute). */
export function coordinatorContenders(
  coordinators: readonly {
    acquire(name: string, options: { waitMs: number }): Promise<{ release(): Promise<boolean> }>;
  }[],
  name: string,
): Contender[] {
  return coordinators.map((c) => ({
    acquire: async () => {
      const lock = await c.acquire(name, { waitMs: 60_000 });
      return async () => {
        await lock.release();
      };
    },
  }));
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
