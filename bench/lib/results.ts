import type { ServerCost } from "./server-meter.js";
import type { Summary } from "./stats.js";

/** What a measured row stands for; the chart and the target checks go by it. */
export type Role =
  /** The raw client doing the same round trips: the floor every ratio is taken against. */
  | "floor"
  /** Another raw or reference measurement shown for context (not a ratio base). */
  | "reference"
  /** The Baton adapter alone (a `BackendSession`, no core). */
  | "session"
  /** Baton through `createCoordinator` (what users call). */
  | "coordinator"
  /** A peer library doing the same operation. */
  | "peer";

/** One measured variant. Latencies in ms; NaN where a column does not apply. */
export interface Row {
  readonly variant: string;
  readonly role: Role;
  /** Samples behind p50/p99. */
  readonly count: number;
  readonly opsPerSec: number;
  readonly p50: number;
  readonly p99: number;
  /**
   * Client CPU (this process, user + system) per operation over the measured rounds only, in
   * microseconds; per grant in a handoff section.
   */
  readonly clientCpuUs?: number;
  /** Server time per operation over the measured rounds only, when the server can tell. */
  readonly server?: ServerCost;
}

/**
 * The figures the bench reports, one section each: a lock's, then a semaphore's permits
 * (`permit-uncontended`, `permit-handoff`).
 */
export type Figure =
  | "uncontended"
  | "handoff"
  | "takeover"
  | "throughput"
  | "permit-uncontended"
  | "permit-handoff"
  /** One client object serving C concurrent callers (see bench/lib/service.ts). */
  | "service"
  /** The same, spread over P processes. */
  | "service-processes"
  /** 1,000 waiters on one name over several processes. */
  | "waiters";

/**
 * Coordinator minus session (core's share) in client CPU per operation, from interleaved
 * rounds: the median of the rounds' differences, and their middle half.
 */
export interface CoreShare {
  /** Median over the rounds of (coordinator's CPU per op - session's), us, of `thread`. */
  readonly clientCpuUs: number;
  /**
   * Whose CPU: the main thread's (where core's code runs; Linux) or, where that is unknown,
   * the whole process's.
   */
  readonly thread: "main" | "process";
  /** With `thread: "main"`, the same median of the whole process's CPU, every thread. */
  readonly processCpuUs?: number;
  /** First quartile of the rounds' differences, us. */
  readonly lowUs: number;
  /** Third quartile of the rounds' differences, us. */
  readonly highUs: number;
  /** Rounds (pairs of differences) behind the median. */
  readonly rounds: number;
  /**
   * True when measured against the coordinator's own backend session (see `measureCoreShare`),
   * not against the section's session row.
   */
  readonly sameSession?: boolean;
}

/** A table of latency rows for one figure of one backend. */
export interface LatencySection {
  readonly figure: Figure;
  readonly title: string;
  /** Ratio base: p50 (and ops/s, when the ops are alike) every row is compared with. */
  readonly floor?: { readonly label: string; readonly p50: number; readonly opsPerSec?: number };
  /** Header of the p99 column (e.g. "max ms" for a handful of samples). */
  readonly p99Label?: string;
  /** Header of the ops/s column (e.g. "handoffs/s"). */
  readonly opsLabel?: string;
  /** What the client CPU and server columns are counted per (default "per op"). */
  readonly costLabel?: string;
  /**
   * Show each row's ops/s over the floor's (higher is better) instead of the floor's time per
   * op over the row's.
   */
  readonly opsVsFloor?: boolean;
  /** The cell of a service-pattern section. */
  readonly service?: {
    readonly mode: "distinct" | "random" | "hot";
    readonly callers: number;
    readonly processes: number;
  };
  readonly rows: readonly Row[];
  /** Core's share, when the section has both a session and a coordinator row. */
  readonly coreShare?: CoreShare;
  /** A waiters section's server requests per grant, by waiter count, when counted. */
  readonly requestsPerGrant?: readonly { readonly waiters: number; readonly requests: number }[];
  /** How it was measured, one sentence each. */
  readonly notes: readonly string[];
}

/** A renewal-request count over the measuring window, and where it was counted. */
export interface RenewalCount {
  /** e.g. "server: INFO commandstats, evalsha+eval calls" or "client: keepAlive() calls". */
  readonly source: string;
  /** The count over the window. */
  readonly total: number;
  /** Requests per renewal core made, per session (the target is at most 1). */
  readonly perRenewal: number;
  /** Requests per nominal renewal interval (TTL / 3), per session. */
  readonly perInterval: number;
}

/** Holding many locks (or permits) in one process: renewal traffic, CPU and memory. */
export interface HeldLocksResult {
  /** What was held: `"locks"`, or `"permits"` of semaphores (see {@link HeldLocksResult.layout}). */
  readonly noun: string;
  /** How the held items are spread, e.g. "100 semaphores of 100 permits, 1 permit per acquire". */
  readonly layout?: string;
  /** Items held (locks or permits). */
  readonly locks: number;
  readonly ttlMs: number;
  /** The session's renewal interval (core: a third of the TTL). */
  readonly intervalMs: number;
  /** Sessions holding the locks (one coordinator: 1). */
  readonly sessions: number;
  readonly acquireMs: number;
  readonly releaseMs: number;
  readonly parallelism: number;
  readonly windowMs: number;
  /** Renewals core made in the window (keepAlive() calls that settled). */
  readonly renewalsInWindow: number;
  /** Renewal requests per interval; the first is the headline (server side when available). */
  readonly renewals: readonly RenewalCount[];
  /** Process CPU (user + system) in ms per second of wall time, while only holding. */
  readonly cpuMsPerSec: number;
  /** Heap (+ external) growth per held lock after a full GC, in bytes; NaN without `--expose-gc`. */
  readonly heapBytesPerLock: number;
  /** The same through a bare backend session (no core), when measured. */
  readonly adapterHeapBytesPerLock?: number;
  /** RSS growth per held lock, in bytes (coarse: the allocator keeps pages). */
  readonly rssBytesPerLock: number;
  readonly gcExposed: boolean;
  /**
   * One more lock's acquire p50 (ms, `probes` acquires one after another): before any is
   * held, while all are held, and after all were released.
   */
  readonly probe?: {
    readonly probes: number;
    readonly emptyP50: number;
    readonly heldP50: number;
    readonly emptyAfterP50: number;
  };
  readonly notes: readonly string[];
}

/** Everything one backend's bench produced. */
export interface BackendResult {
  readonly backend: string;
  /** Server software, version and topology, e.g. "redis-server 7.2.4, one node". */
  readonly server: string;
  readonly sections: readonly LatencySection[];
  readonly held?: HeldLocksResult;
  /** Many locks held by one coordinator (the scale section). */
  readonly heldScale?: HeldLocksResult;
  /** Many names watched by one coordinator (the scale section). */
  readonly watched?: WatchResult;
  /** Permits of semaphores held by one session, when the backend has semaphores. */
  readonly heldPermits?: HeldLocksResult;
  /** What the backend's guarantees declare: permit figures are measured only when true. */
  readonly semaphores?: boolean;
  /**
   * `"permits"`: only the permit figures were measured (the memory backend, which has no store
   * to measure a lock's round trips against).
   */
  readonly scope?: "permits";
  /** Why the permit figures have no raw floor, when they have none. */
  readonly permitNoFloor?: string;
  /** Parts that failed, with the error; the rest of the report still stands. */
  readonly errors: readonly string[];
  readonly elapsedMs: number;
}

/** What a row costs besides its latency (see {@link Row}). */
export interface Cost {
  readonly clientCpuUs?: number;
  readonly server?: ServerCost;
}

/** A row from a summary (and, when measured, its cost). */
export function row(variant: string, role: Role, s: Summary, cost: Cost = {}): Row {
  return {
    variant,
    role,
    count: s.count,
    opsPerSec: s.opsPerSec,
    p50: s.p50,
    p99: s.p99,
    ...(cost.clientCpuUs === undefined ? {} : { clientCpuUs: cost.clientCpuUs }),
    ...(cost.server === undefined ? {} : { server: cost.server }),
  };
}

/** The section's floor row, if one is marked. */
export function floorRow(section: LatencySection): Row | undefined {
  return section.rows.find((r) => r.role === "floor");
}

/** The first section for `figure`, if measured. */
export function sectionOf(result: BackendResult, figure: Figure): LatencySection | undefined {
  return result.sections.find((s) => s.figure === figure);
}

/** Many names watched by one coordinator: set-up, memory and notification latency. */
export interface WatchResult {
  readonly names: number;
  /** From the first watch() call to every watch's first value, ms. */
  readonly setupMs: number;
  /** Heap (+ external) growth per watched name after a full GC, bytes; NaN without --expose-gc. */
  readonly heapBytesPerName: number;
  /** Notifications timed (an acquire and a release each, on names drawn at random). */
  readonly samples: number;
  /** From another coordinator's acquire resolving to the watcher's holder value, ms. */
  readonly acquiredP50: number;
  readonly acquiredP99: number;
  /** From that coordinator's release resolving to the watcher's null, ms. */
  readonly releasedP50: number;
  readonly releasedP99: number;
  /** The same notifications with one name watched, for comparison. */
  readonly oneNameP50?: number;
  readonly notes: readonly string[];
}
