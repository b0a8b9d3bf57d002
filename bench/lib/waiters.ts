/**
 * Many waiters on one name, spread over several processes (bench/lib/waiters-worker.ts, one
 * coordinator each): handoff latency against the uncontended floor, and the server's work per
 * handoff with few waiters and with many, so a herd (every waiter woken, or polling, at each
 * release) shows as work growing with the waiters.
 */
import { fileURLToPath } from "node:url";
import { BenchChild } from "./child.js";
import type { ServerCounter } from "./held-locks.js";
import type { RawKind } from "./raw-waiters.js";
import { type LatencySection, type Row, row } from "./results.js";
import {
  addDelta,
  emptyTotals,
  idleRate,
  type ServerMeter,
  type ServerTotals,
  serverCost,
  subtractIdle,
} from "./server-meter.js";
import { summarise } from "./stats.js";

const WORKER = fileURLToPath(new URL("./waiters-worker.ts", import.meta.url));

/** Options of {@link measureWaiters}. */
export interface WaitersOptions {
  readonly url: string;
  readonly ttlMs: number;
  /** Processes the waiters are spread over. Default 10. */
  readonly processes?: number;
  /** Waiters in all, one row each (the first is the few-waiters case). Default [10, 1000]. */
  readonly waiters?: readonly number[];
  /** Length of one run, ms; the first second is left out (the line forming). Default 4,000. */
  readonly runMs?: number;
  /** Runs per waiter count, in alternate orders. Default 2. */
  readonly rounds?: number;
  /** The uncontended floor (ratio base), when measured in this run. */
  readonly floor?: Row;
  readonly server?: ServerMeter;
  readonly idleMs?: number;
  /** Counts the server's requests (e.g. Redis commands), per handoff. */
  readonly requests?: ServerCounter;
  readonly notes?: readonly string[];
  /**
   * The raw client's hand-off between processes (raw-waiters.ts), run beside the coordinator's
   * in the same rounds: waiters on the store's own blocking wait, one connection each.
   */
  readonly raw?: RawWaiters;
}

/** The raw hand-off rows of {@link measureWaiters}. */
export interface RawWaiters {
  readonly kind: RawKind;
  /** The store's URL as its raw client takes it. */
  readonly url: string;
  /** What the raw waiters do, e.g. "raw BLPOP + RPUSH". */
  readonly label: string;
  /** Waiter counts with a raw row (default: every count); one connection per waiter. */
  readonly counts?: readonly number[];
}

/** Hand-off samples (ms) and the time they span (ms). */
interface Tally {
  readonly samples: number[];
  ms: number;
}

const HOLD_MS = 2;
const PAUSE_MS = 1;
const SETTLE_MS = 1_000;

/**
 * Each waiter loops acquire, hold 2 ms, release, pause 1 ms on one lock; a sample is the time
 * from one holder's `release()` call to the next grant, in whichever process. Rows: one per
 * waiter count; handoffs/s, p50 and p99, client CPU (not measured: the work is in the
 * children) and server time and requests per grant.
 */
export async function measureWaiters(options: WaitersOptions): Promise<LatencySection> {
  const processes = options.processes ?? 10;
  const counts = options.waiters ?? [10, 1_000];
  const runMs = options.runMs ?? 4_000;
  const rounds = options.rounds ?? 2;
  type Reply = { events: [number, number][]; samples?: number[] };
  const children = Array.from(
    { length: processes },
    () => new BenchChild<Reply>(WORKER, [options.url, String(options.ttlMs)]),
  );
  const raw = options.raw;
  const rawCounts = raw === undefined ? [] : counts.filter((c) => raw.counts?.includes(c) ?? true);
  const rawChildren =
    raw === undefined
      ? []
      : Array.from(
          { length: processes },
          () => new BenchChild<Reply>(WORKER, [raw.url, String(options.ttlMs), raw.kind]),
        );
  // Per waiter count: the hand-off samples and the time they span, of the coordinators and
  // of the raw waiters.
  const tallies = new Map<number, Tally>(counts.map((c) => [c, { samples: [], ms: 0 }]));
  const rawTallies = new Map<number, Tally>(rawCounts.map((c) => [c, { samples: [], ms: 0 }]));
  const grants = new Map<number, number>(counts.map((c) => [c, 0]));
  const server = new Map<number, ServerTotals>(counts.map((c) => [c, emptyTotals()]));
  const requests = new Map<number, number>(counts.map((c) => [c, 0]));
  let floor = options.floor;
  let run = 0;
  try {
    for (const c of [...children, ...rawChildren]) await c.ready();
    const once = async (waiters: number, ms: number, on = children) => {
      const name = `bench-waiters/${waiters}-${run++}`;
      const share = (p: number) =>
        Math.floor(waiters / processes) + (p < waiters % processes ? 1 : 0);
      const replies = await Promise.all(
        on.map((c, p) =>
          c.request({
            op: "run",
            name,
            waiters: share(p),
            holdMs: HOLD_MS,
            pauseMs: PAUSE_MS,
            ms,
            first: p === 0,
          }),
        ),
      );
      return replies.flatMap((r) => r.events).sort((a, b) => a[0] - b[0]);
    };
    // One run's samples: from each release() call to the next grant, the first second left out.
    const handoffs = (events: [number, number][], tally: Tally): void => {
      const start = (events[0]?.[0] ?? 0) + SETTLE_MS;
      let first: number | undefined;
      let last = 0;
      for (let i = 1; i < events.length; i++) {
        const [, releasedAt] = events[i - 1] as [number, number];
        const [grantedAt] = events[i] as [number, number];
        if (releasedAt < start || grantedAt < releasedAt) continue;
        first ??= releasedAt;
        last = grantedAt;
        tally.samples.push(grantedAt - releasedAt);
      }
      if (first !== undefined) tally.ms += last - first;
    };
    if (rawChildren.length > 0) await once(processes, 1_000, rawChildren);
    // Every child's session open and code warm.
    await once(processes, 1_000);
    if (floor === undefined) {
      // In a child, as the waiters run: the first third left out (warm-up).
      const first = children[0] as (typeof children)[number];
      const started = performance.now();
      const reply = await first.request({ op: "floor", name: "bench-waiters/floor", count: 300 });
      floor = row(
        "coordinator uncontended acquire+release",
        "reference",
        summarise(reply.samples?.slice(100) ?? [], performance.now() - started),
      );
    }
    const idle =
      options.server && (options.idleMs ?? 0) > 0
        ? await idleRate(options.server, options.idleMs as number)
        : undefined;
    for (let round = 0; round < rounds; round++) {
      for (const waiters of round % 2 === 0 ? counts : [...counts].reverse()) {
        const before = options.server ? await options.server.read() : undefined;
        const r0 = options.requests ? await options.requests.read() : 0;
        const t0 = performance.now();
        const events = await once(waiters, runMs);
        const took = performance.now() - t0;
        const r1 = options.requests ? await options.requests.read() : 0;
        if (options.server && before) {
          const totals = server.get(waiters) as ServerTotals;
          addDelta(totals, before, await options.server.read());
          if (idle) subtractIdle(totals, idle, took);
        }
        requests.set(
          waiters,
          (requests.get(waiters) as number) + r1 - r0 - (options.requests?.selfCost ?? 0),
        );
        grants.set(waiters, (grants.get(waiters) as number) + events.length);
        handoffs(events, tallies.get(waiters) as Tally);
        const rawTally = rawTallies.get(waiters);
        if (rawTally !== undefined) handoffs(await once(waiters, runMs, rawChildren), rawTally);
      }
    }
  } finally {
    await Promise.all([...children, ...rawChildren].map((c) => c.close()));
  }
  const rows = counts.flatMap((waiters) => {
    const tally = tallies.get(waiters) as Tally;
    const s = summarise(tally.samples, tally.ms);
    const g = Math.max(1, grants.get(waiters) as number);
    const totals = server.get(waiters) as ServerTotals;
    const what = `${waiters.toLocaleString("en-US")} waiters over ${processes} processes`;
    const coordinator = row(what, "coordinator", s, {
      ...(options.server ? { server: serverCost(options.server, totals, g) } : {}),
    });
    const rawTally = rawTallies.get(waiters);
    if (raw === undefined || rawTally === undefined) return [coordinator];
    const rawRow = row(
      `${what}, ${raw.label}`,
      "reference",
      summarise(rawTally.samples, rawTally.ms),
    );
    return [rawRow, coordinator];
  });
  const requestsPerGrant = counts.map((w) => ({
    waiters: w,
    requests: (requests.get(w) as number) / Math.max(1, grants.get(w) as number),
  }));
  const perGrant = requestsPerGrant.map(
    (r) => `${r.waiters.toLocaleString("en-US")} waiters: ${r.requests.toFixed(2)}`,
  );
  return {
    figure: "waiters",
    title: `${counts.map((c) => c.toLocaleString("en-US")).join(" and ")} waiters on one name over ${processes} processes`,
    ...(floor ? { floor: { label: floor.variant, p50: floor.p50 } } : {}),
    opsLabel: "handoffs/s",
    costLabel: "per grant",
    rows,
    ...(options.requests ? { requestsPerGrant } : {}),
    notes: [
      `${processes} processes, each one coordinator with its share of the waiters; each waiter loops acquire, hold ${HOLD_MS} ms, release, pause ${PAUSE_MS} ms; ${rounds} runs of ${runMs / 1000} s per waiter count, in alternate orders, the first ${SETTLE_MS / 1000} s of each left out`,
      "a sample: from one holder's release() call to the next grant, in whichever process (the system's monotonic clock, shared by the processes); handoffs/s includes the hold",
      ...(options.requests
        ? [`server requests per grant (${options.requests.source}): ${perGrant.join(", ")}`]
        : []),
      ...(options.floor
        ? []
        : [
            "ratio base: one child's coordinator, uncontended acquire + release of a lock of its own, before the runs (the uncontended section did not run)",
          ]),
      ...(raw === undefined
        ? []
        : [
            `${raw.label}: the raw client's hand-off between the same processes, in the same rounds; each waiter its own connection, blocked in the store's own wait (nothing runs in the client between a release and the next grant); no lease, no token; server time not measured for it`,
          ]),
      ...(options.notes ?? []),
    ],
  };
}
