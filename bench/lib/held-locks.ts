import type { BackendSession, Coordinator, Grant, Lock, LockBackend } from "@baton/core";
import { CountingBackend } from "./counting-backend.js";
import type { HeldLocksResult, RenewalCount } from "./results.js";
import { quantile } from "./stats.js";
import { benchCoordinator } from "./telemetry.js";

/** A cumulative request counter read from the store (for renewal traffic, server side). */
export interface ServerCounter {
  /** e.g. "server: INFO commandstats, evalsha+eval calls". */
  readonly source: string;
  /** The counter now. */
  read(): Promise<number>;
  /** Requests each `read()` itself adds to the counter (subtracted once per window). */
  readonly selfCost?: number;
}

/**
 * What {@link measureHeldLocks} holds: locks (the default, {@link LOCKS}) or a semaphore's
 * permits ({@link permitItems}). Item `i` of `count`; a negative `i` is a warm-up item, taken and
 * released before the baseline, on a name of its own (`-1`, `-2`, ...: as many as are taken at
 * once).
 */
export interface HeldItems {
  /** `"locks"` or `"permits"`, for the report. */
  readonly noun: string;
  /** How `count` items are spread over names, for the report. */
  layout?(count: number): string;
  /** A holder of item `i` through a coordinator, for `count` items named under `prefix`. */
  coordinator(c: Coordinator, prefix: string, count: number): (i: number) => Promise<Lock>;
  /**
   * Held at scale (the `scale` section): overrides the count, and times one more lock's
   * acquire with none held and with every item held.
   */
  readonly scale?: HeldScale;
  /** The same through a bare backend session (no core). */
  session(
    s: BackendSession,
    prefix: string,
    count: number,
    signal: AbortSignal,
  ): (i: number) => Promise<Grant | null>;
}

/** What the scale section changes of the held-locks figures. */
export interface HeldScale {
  /** Items held. */
  readonly locks: number;
  /** Lease length, ms (renewal interval: a third of it). */
  readonly ttlMs: number;
  /** Acquires of one more lock timed with none held, then with all held. */
  readonly probes: number;
}

/** Locks named `<prefix>/h<i>` (`<prefix>/warm<-i>` for the warm-up). */
export const LOCKS: HeldItems = {
  noun: "locks",
  coordinator: (c, prefix) => (i) =>
    c.acquire(i < 0 ? `${prefix}/warm${-i}` : `${prefix}/h${i}`, { waitMs: 30_000 }),
  session: (s, prefix, _count, signal) => (i) =>
    s.acquire(i < 0 ? `${prefix}/warm${-i}` : `${prefix}/h${i}`, { wait: i >= 0, signal }),
};

/**
 * Permits of `semaphores` semaphores named `<prefix>/s<j>`, each of `count / semaphores`
 * permits, taken one per acquire, item `i` from semaphore `i % semaphores` (the warm-up from
 * `<prefix>/warm`).
 */
export function permitItems(semaphores: number): HeldItems {
  const limitOf = (count: number) => Math.max(1, Math.ceil(count / semaphores));
  const nameOf = (prefix: string, i: number) =>
    i < 0 ? `${prefix}/warm` : `${prefix}/s${i % semaphores}`;
  return {
    noun: "permits",
    layout: (count) =>
      `${semaphores} semaphores of ${limitOf(count)} permits each, 1 permit per acquire`,
    coordinator: (c, prefix, count) => {
      const limit = limitOf(count);
      const sems = Array.from({ length: semaphores }, (_, j) =>
        c.semaphore(nameOf(prefix, j), { permits: limit }),
      );
      // Room for every warm-up item at once.
      const warm = c.semaphore(nameOf(prefix, -1), { permits: Math.max(limit, WARM_ROOM) });
      return (i) =>
        (i < 0 ? warm : (sems[i % semaphores] as typeof warm)).acquire({ waitMs: 30_000 });
    },
    session: (s, prefix, count, signal) => {
      const limit = limitOf(count);
      const acquirePermits = s.acquirePermits?.bind(s);
      if (acquirePermits === undefined)
        throw new Error("bench: this backend's sessions have no permits");
      return (i) =>
        acquirePermits(nameOf(prefix, i), {
          limit: i < 0 ? Math.max(limit, WARM_ROOM) : limit,
          permits: 1,
          mode: "permit",
          wait: i >= 0,
          signal,
        });
    },
  };
}

/** Options of {@link measureHeldLocks}. */
export interface HeldLocksOptions {
  /** The backend (the caller closes it). */
  readonly backend: LockBackend;
  readonly ttlMs: number;
  readonly prefix: string;
  /** What is held. Default {@link LOCKS}. */
  readonly items?: HeldItems;
  /** Items held. Default 10,000. */
  readonly locks?: number;
  /** Acquires and releases in flight at once. Default 64. */
  readonly parallelism?: number;
  /** Renewal intervals measured. Default 5. */
  readonly windowIntervals?: number;
  /**
   * Also hold `locks` locks through a bare backend session (no core) first and report its
   * memory per lock, so the report can split the figure into the adapter's and core's share.
   */
  readonly adapterAlone?: boolean;
  /** Server-side counters of the session's requests, headline first. */
  readonly server?: readonly ServerCounter[];
  readonly notes?: readonly string[];
}

/** `global.gc` when node runs with `--expose-gc`. */
const gc = (globalThis as { gc?: () => void }).gc;

function memory(): { heap: number; rss: number } {
  if (gc) {
    gc();
    gc();
  }
  const m = process.memoryUsage();
  return { heap: m.heapUsed + m.external, rss: m.rss };
}

/** `promise`, or a rejection after `ms`. */
async function withTimeout(promise: Promise<void>, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`held locks: ${what} within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `task(i)` for i in [0, n) with at most `parallelism` in flight. */
async function pool(n: number, parallelism: number, task: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallelism, n) }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

/**
 * Holds `locks` locks through one coordinator (one session), then over `windowIntervals`
 * renewal intervals counts renewal requests (client side: `keepAlive()` calls; server side:
 * the given counters), process CPU, and memory per lock (heap growth after a full GC from
 * just before the acquires to just after, divided by the locks).
 */
export async function measureHeldLocks(options: HeldLocksOptions): Promise<HeldLocksResult> {
  const count = options.items?.scale?.locks ?? options.locks ?? 10_000;
  const parallelism = options.parallelism ?? 64;
  const windowIntervals = options.windowIntervals ?? 5;
  const items = options.items ?? LOCKS;
  const counting = new CountingBackend(options.backend);
  const coordinator = benchCoordinator({
    backend: counting,
    ttlMs: options.ttlMs,
    ownerId: "bench-held",
  });
  const adapterBytes = options.adapterAlone
    ? await adapterMemory(options, count, parallelism)
    : undefined;
  const locks: Lock[] = new Array(count);
  try {
    // Opens the session and warms every code path before the baseline, at the acquisition's
    // parallelism (see warmUp).
    const hold = items.coordinator(coordinator, options.prefix, count);
    await warmUp(parallelism, hold, (lock) => lock.release());
    const probes = items.scale?.probes ?? 0;
    const probe = async () => {
      const samples: number[] = [];
      for (let i = 0; i < probes; i++) {
        const t = performance.now();
        const lock = await coordinator.acquire(`${options.prefix}/probe`, { waitMs: 30_000 });
        samples.push(performance.now() - t);
        await lock.release();
      }
      return quantile(
        samples.sort((a, b) => a - b),
        0.5,
      );
    };
    const emptyP50 = probes > 0 ? await probe() : Number.NaN;
    const before = memory();
    const t0 = performance.now();
    await pool(count, parallelism, async (i) => {
      locks[i] = await hold(i);
    });
    const acquireMs = performance.now() - t0;
    const after = memory();
    // The window runs from just after one renewal settled to just after the `windowIntervals`th
    // next one settled, so the server counters see whole renewals only.
    const intervalMs = Math.max(1, Math.floor(options.ttlMs / 3));
    await withTimeout(counting.nextSettled(), intervalMs * 3, "no renewal");
    const server = options.server ?? [];
    const s0 = await Promise.all(server.map((s) => s.read()));
    const k0 = counting.settled;
    const cpu0 = process.cpuUsage();
    const w0 = performance.now();
    while (counting.settled < k0 + windowIntervals) {
      await withTimeout(counting.nextSettled(), intervalMs * 3, "renewals stopped");
    }
    const cpu = process.cpuUsage(cpu0);
    const windowMs = performance.now() - w0;
    const k1 = counting.settled;
    const s1 = await Promise.all(server.map((s) => s.read()));
    const intervals = windowMs / intervalMs;
    const renewed = k1 - k0;
    const counted = (source: string, total: number): RenewalCount => ({
      source,
      total,
      perRenewal: total / renewed,
      perInterval: total / intervals / counting.sessions,
    });
    const renewals: RenewalCount[] = [
      ...server.map((s, i) =>
        counted(s.source, Math.max(0, (s1[i] as number) - (s0[i] as number) - (s.selfCost ?? 0))),
      ),
      counted("client: keepAlive() calls core made", renewed),
    ];
    const stillHeld = locks.filter((l) => l.held).length;
    const heldP50 = probes > 0 ? await probe() : Number.NaN;
    const t1 = performance.now();
    await pool(count, parallelism, async (i) => {
      await (locks[i] as Lock).release();
    });
    const releaseMs = performance.now() - t1;
    const emptyAfterP50 = probes > 0 ? await probe() : Number.NaN;
    return {
      ...(probes > 0 ? { probe: { probes, emptyP50, heldP50, emptyAfterP50 } } : {}),
      noun: items.noun,
      ...(items.layout === undefined ? {} : { layout: items.layout(count) }),
      locks: count,
      ttlMs: options.ttlMs,
      intervalMs,
      sessions: counting.sessions,
      acquireMs,
      releaseMs,
      parallelism,
      windowMs,
      renewalsInWindow: renewed,
      renewals,
      cpuMsPerSec: (cpu.user + cpu.system) / 1000 / (windowMs / 1000),
      heapBytesPerLock: gc ? (after.heap - before.heap) / count : Number.NaN,
      ...(adapterBytes !== undefined && gc ? { adapterHeapBytesPerLock: adapterBytes } : {}),
      rssBytesPerLock: (after.rss - before.rss) / count,
      gcExposed: gc !== undefined,
      notes: [
        `${stillHeld} of ${count} ${items.noun} still held at the end of the window`,
        `window: from one settled renewal to the ${windowIntervals}th next (${renewed} renewals by core in ${(windowMs / 1000).toFixed(2)} s, nominal interval ${intervalMs} ms); per interval = count / (window / interval) / sessions`,
        `memory: after a warm-up that took ${Math.min(parallelism, WARM_ROOM)} ${items.noun} at once and gave them back, so a connection pool already has the size the acquisition gives it (its growth depends on the requests in flight, not on the ${items.noun} held)`,
        ...(options.notes ?? []),
      ],
    };
  } finally {
    await coordinator.close().catch(() => undefined);
  }
}

/**
 * {@link measureHeldLocks} as every backend's bench runs it, on a backend of its own: a 3 s
 * TTL, locks named under `held`, the adapter alone measured too; closes `backend` at the end.
 */
export async function measureBackendHeldLocks(
  backend: LockBackend,
  options: Pick<HeldLocksOptions, "items" | "locks" | "server" | "notes"> = {},
): Promise<HeldLocksResult> {
  const scale = options.items?.scale;
  try {
    return await measureHeldLocks({
      adapterAlone: true,
      backend,
      ttlMs: 3_000,
      prefix: "held",
      ...options,
      // At scale: no bare-session pass (it would take as long again), the scale's TTL.
      ...(scale ? { adapterAlone: false, ttlMs: scale.ttlMs, prefix: "scale" } : {}),
    });
  } finally {
    await backend.close();
  }
}

/** Warm-up items a semaphore has room for at once (at least the parallelism of any run). */
const WARM_ROOM = 256;

/**
 * Takes `parallelism` warm-up items at once (items `-1` to `-parallelism`), then gives them
 * all back: the code paths are warm and the client's connection pool (an HTTP agent's sockets,
 * say) is as large as the acquisition after the baseline makes it, so the memory per item held
 * does not count the pool's growth, which depends on the requests in flight, not on the items.
 */
async function warmUp<T>(
  parallelism: number,
  hold: (i: number) => Promise<T>,
  release: (item: T) => Promise<unknown>,
): Promise<void> {
  const n = Math.min(parallelism, WARM_ROOM);
  const items = await Promise.all(Array.from({ length: n }, (_, k) => hold(-1 - k)));
  await Promise.all(items.map(release));
}

/**
 * Heap (+ external) growth per item held through a bare backend session (the adapter alone),
 * after a full GC; the session is closed afterwards, which frees its locks.
 */
async function adapterMemory(
  options: HeldLocksOptions,
  count: number,
  parallelism: number,
): Promise<number> {
  // A long TTL: nothing renews a bare session while its locks are taken (memory does not
  // depend on the TTL).
  const session = await options.backend.openSession({
    ttlMs: 60_000,
    ownerId: "bench-held-adapter",
  });
  const signal = new AbortController().signal;
  const grants: unknown[] = new Array(count);
  const hold = (options.items ?? LOCKS).session(
    session,
    `${options.prefix}-adapter`,
    count,
    signal,
  );
  try {
    await warmUp(parallelism, hold, async (grant) => {
      if (grant) await session.release(grant);
    });
    const before = memory();
    await pool(count, parallelism, async (i) => {
      grants[i] = await hold(i);
    });
    const after = memory();
    return (after.heap - before.heap) / count;
  } finally {
    // No keepalive runs on a bare session: close it long before its TTL ends.
    await session.close();
  }
}

/** {@link LOCKS} at scale (see {@link HeldScale}). */
export function scaledLocks(scale: HeldScale): HeldItems {
  return { ...LOCKS, scale };
}
