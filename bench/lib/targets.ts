import {
  type BackendResult,
  floorRow,
  type LatencySection,
  type Row,
  sectionOf,
} from "./results.js";

/** One measured target (see bench/README.md), checked honestly (met: false when missed). */
export interface TargetCheck {
  readonly backend: string;
  readonly target: string;
  readonly measured: string;
  /** undefined: not measured in this run. */
  readonly met: boolean | undefined;
}

/** Uncontended coordinator p50 over the floor's, at most. */
export const UNCONTENDED_LIMIT = 1.15;
/** PostgreSQL's uncontended limit holds on a floor p50 of at most this (ms): a fast host. */
export const POSTGRES_FLOOR_P50_MS = 0.13;
/** Redis: coordinator p50 over redis-semaphore's Mutex p50, at most. */
export const REDIS_SEMAPHORE_LIMIT = 1.1;
/** Redis: coordinator p50 over each redlock package's p50, at most (at least 10% faster). */
export const REDLOCK_LIMIT = 0.9;
/** Coordinator client CPU per acquire + release over the floor's, at most (us; Redis, PostgreSQL). */
export const CLIENT_CPU_OVER_FLOOR_US = 10;
/** Backends the client CPU target applies to. */
export const CLIENT_CPU_BACKENDS: readonly string[] = ["redis", "postgres"];
/** Coordinator minus session (core's share) per acquire + release, at most (us; client CPU). */
export const CORE_SHARE_US = 5;

/** Handoff p50 at most this many of the floor's single operation (acquire + release). */
export const HANDOFF_LIMIT = 2;
/** Renewal requests per interval per session, at most. */
export const RENEWAL_LIMIT = 1;
/** Bytes of memory per held lock, under. */
export const MEMORY_LIMIT = 2_048;

/** Uncontended permit acquire + release: coordinator p50 over the floor's, at most. */
export const PERMIT_LIMIT = 1.15;
/** Redis: permit coordinator p50 over redis-semaphore's `Semaphore` p50, at most. */
export const REDIS_SEMAPHORE_PERMIT_LIMIT = 1.15;

/**
 * The service pattern (one coordinator, C concurrent callers): its locks/s over the floor's
 * (the raw client at the same C; on PostgreSQL a pool of 16 connections), at least, by backend.
 */
export const SERVICE_LIMITS: Readonly<Record<string, number>> = {
  redis: 0.9,
  postgres: 0.8,
  etcd: 0.8,
  zookeeper: 0.8,
  dynamodb: 0.8,
  "azure-blob": 0.8,
};
/** The concurrencies the service-pattern limits apply to. */
export const SERVICE_TARGET_CALLERS: readonly number[] = [16, 256];
/** The key modes the service-pattern limits apply to. */
export const SERVICE_TARGET_MODES: readonly ("distinct" | "random")[] = ["distinct", "random"];
/** The scale rows: bytes per held lock with many held, under. */
export const SCALE_MEMORY_LIMIT = 1_024;
/** The scale rows: one more lock's acquire p50 with many held over the empty case's, at most. */
export const SCALE_PROBE_LIMIT = 1.1;
/** Many waiters on one name: handoff p50 over the uncontended floor's p50, at most. */
export const WAITERS_P50_LIMIT = 2;
/** Many waiters on one name: handoff p99 over the uncontended floor's p50, at most. */
export const WAITERS_P99_LIMIT = 5;
/**
 * Many waiters on one name: server requests per grant with the most waiters over those with the
 * fewest, at most (independent of the number of waiters: no herd).
 */
export const WAITERS_REQUESTS_LIMIT = 1.1;

const ms = (n: number) => `${n.toFixed(3)} ms`;
const us = (n: number) => `${n.toFixed(1)} us`;
const signed = (n: number) => `${n >= 0 ? "+" : ""}${n.toFixed(1)} us`;

/**
 * Core's share of a section against {@link CORE_SHARE_US}: the median of the interleaved
 * rounds' differences in client CPU (see `coreShareOf` in interleave.ts), with the two rows'
 * totals and their p50 difference beside it; from the totals alone for a section measured
 * without rounds. Undefined without a session and a coordinator row.
 */
function coreShareCheck(
  section: LatencySection,
): { readonly measured: string; readonly met: boolean } | undefined {
  const coord = section.rows.find((x) => x.role === "coordinator");
  const session = section.rows.find((x) => x.role === "session");
  if (session?.clientCpuUs === undefined || coord?.clientCpuUs === undefined) return undefined;
  const totals = `${us(coord.clientCpuUs)} vs ${us(session.clientCpuUs)}`;
  const p50 = `p50 ${signed((coord.p50 - session.p50) * 1_000)}`;
  const share = section.coreShare;
  if (share === undefined) {
    const cpu = coord.clientCpuUs - session.clientCpuUs;
    return { measured: `client CPU ${signed(cpu)} (${totals}); ${p50}`, met: cpu <= CORE_SHARE_US };
  }
  return {
    measured: `${share.thread === "main" ? "main-thread" : "client"} CPU ${signed(share.clientCpuUs)}, median of ${share.rounds} rounds' differences (middle half ${signed(share.lowUs)} to ${signed(share.highUs)}${share.processCpuUs === undefined ? "" : `; whole process ${signed(share.processCpuUs)}`}; rows' totals ${totals}); ${p50}`,
    met: share.clientCpuUs <= CORE_SHARE_US,
  };
}

/**
 * Checks one backend's results against the bench's targets: its locks', the service pattern's
 * and the scale rows', then its permits'.
 */
export function checkTargets(r: BackendResult): TargetCheck[] {
  return [
    ...(r.scope === "permits" ? [] : [...checkLockTargets(r), ...checkScaleTargets(r)]),
    ...checkPermitTargets(r),
  ];
}

const locks = (n: number) => `${Math.round(n).toLocaleString("en-US")}/s`;

/**
 * The service pattern's and the scale rows' targets: one coordinator's locks/s against the
 * floor at the same C (and on Redis against redis-semaphore's Mutex at every C), 100,000 held
 * locks, many waiters on one name. Only what this run measured is listed.
 */
export function checkScaleTargets(r: BackendResult): TargetCheck[] {
  const out: TargetCheck[] = [];
  const check = (target: string, measured: string, met: boolean | undefined) =>
    out.push({ backend: r.backend, target, measured, met });
  const service = r.sections.filter((s) => s.figure === "service" && s.service !== undefined);
  const limit = SERVICE_LIMITS[r.backend];
  for (const section of service) {
    const cell = section.service as NonNullable<LatencySection["service"]>;
    const coord = section.rows.find((x) => x.role === "coordinator");
    const floor = floorRow(section);
    if (coord === undefined) continue;
    const where = `C = ${cell.callers}, ${cell.mode} keys`;
    if (
      limit !== undefined &&
      SERVICE_TARGET_CALLERS.includes(cell.callers) &&
      (SERVICE_TARGET_MODES as readonly string[]).includes(cell.mode)
    ) {
      const target = `service pattern, ${where}: coordinator locks/s >= ${limit}x ${floor?.variant ?? "the floor"}`;
      if (floor && floor.opsPerSec > 0) {
        const ratio = coord.opsPerSec / floor.opsPerSec;
        check(
          target,
          `${ratio.toFixed(2)}x (${locks(coord.opsPerSec)} vs ${locks(floor.opsPerSec)})`,
          ratio >= limit,
        );
      } else {
        check(target, "no floor measured", undefined);
      }
    }
    if (r.backend === "redis" && cell.mode !== "hot") {
      const peer = section.rows.find((x) => x.role === "peer" && /redis-semaphore/.test(x.variant));
      if (peer && peer.opsPerSec > 0) {
        const ratio = coord.opsPerSec / peer.opsPerSec;
        check(
          `service pattern, ${where}: coordinator locks/s >= redis-semaphore Mutex's`,
          `${ratio.toFixed(2)}x (${locks(coord.opsPerSec)} vs ${locks(peer.opsPerSec)})`,
          ratio >= 1,
        );
      }
    }
  }
  const held = r.heldScale;
  if (held) {
    const n = held.locks.toLocaleString("en-US");
    const perLock = held.gcExposed ? held.heapBytesPerLock : held.rssBytesPerLock;
    check(
      `${n} held locks: memory per lock < ${SCALE_MEMORY_LIMIT} B`,
      `${perLock.toFixed(0)} B (${held.gcExposed ? "heap+external after GC" : "RSS; no --expose-gc"})`,
      perLock < SCALE_MEMORY_LIMIT,
    );
    const renewal = held.renewals[0];
    if (renewal) {
      check(
        `${n} held locks: renewal requests per interval per session <= ${RENEWAL_LIMIT}`,
        `${renewal.perRenewal.toFixed(2)} per renewal, ${renewal.perInterval.toFixed(2)} per interval (${renewal.source})`,
        renewal.perRenewal <= RENEWAL_LIMIT,
      );
    }
    if (held.probe) {
      const { heldP50, emptyP50, emptyAfterP50 } = held.probe;
      const ratio = heldP50 / emptyP50;
      // The empty case timed again after the release shows how far the store drifted meanwhile.
      const after = Number.isFinite(emptyAfterP50)
        ? `; empty again after the release ${ms(emptyAfterP50)}, ${(heldP50 / emptyAfterP50).toFixed(2)}x`
        : "";
      check(
        `${n} held locks: one more lock's acquire p50 <= ${SCALE_PROBE_LIMIT}x the empty case`,
        `${ratio.toFixed(2)}x (${ms(heldP50)} vs ${ms(emptyP50)}${after})`,
        ratio <= SCALE_PROBE_LIMIT,
      );
    }
  }
  const waiters = r.sections.find((s) => s.figure === "waiters");
  if (waiters?.floor) {
    const base = waiters.floor.p50;
    // Rows are named "<count> waiters over <P> processes": the largest count is the target's.
    const count = (x: Row) => Number.parseInt(x.variant.replace(/,/g, ""), 10);
    const coordinators = waiters.rows.filter((x) => x.role === "coordinator");
    const most = [...coordinators].sort((a, b) => count(b) - count(a))[0];
    if (most) {
      const what = most.variant;
      // The raw client's hand-off between the same processes, when measured (with as many
      // waiters, else with the most it was measured with): for context.
      const raws = waiters.rows.filter((x) => x.role === "reference");
      const raw =
        raws.find((x) => count(x) === count(most)) ??
        [...raws].sort((a, b) => count(b) - count(a))[0];
      const rawWhat =
        raw === undefined
          ? ""
          : `; raw blocking hand-off${count(raw) === count(most) ? "" : ` with ${count(raw).toLocaleString("en-US")} waiters`}`;
      const rawP50 = raw ? `${rawWhat} ${(raw.p50 / base).toFixed(2)}x` : "";
      const rawP99 = raw ? `${rawWhat} ${(raw.p99 / base).toFixed(2)}x` : "";
      check(
        `${what}: handoff p50 <= ${WAITERS_P50_LIMIT}x the uncontended floor's p50`,
        `${(most.p50 / base).toFixed(2)}x (${ms(most.p50)} vs ${ms(base)}${rawP50})`,
        most.p50 / base <= WAITERS_P50_LIMIT,
      );
      check(
        `${what}: handoff p99 <= ${WAITERS_P99_LIMIT}x the uncontended floor's p50`,
        `${(most.p99 / base).toFixed(2)}x (${ms(most.p99)} vs ${ms(base)}${rawP99})`,
        most.p99 / base <= WAITERS_P99_LIMIT,
      );
    }
    const per = waiters.requestsPerGrant;
    const fewest = per?.reduce((a, b) => (b.waiters < a.waiters ? b : a));
    const largest = per?.reduce((a, b) => (b.waiters > a.waiters ? b : a));
    if (fewest && largest && fewest !== largest && fewest.requests > 0) {
      const ratio = largest.requests / fewest.requests;
      check(
        `server requests per grant with ${largest.waiters.toLocaleString("en-US")} waiters <= ${WAITERS_REQUESTS_LIMIT}x with ${fewest.waiters.toLocaleString("en-US")}`,
        `${ratio.toFixed(2)}x (${largest.requests.toFixed(2)} vs ${fewest.requests.toFixed(2)})`,
        ratio <= WAITERS_REQUESTS_LIMIT,
      );
    }
  }
  return out;
}

/** The lock figures' targets. */
function checkLockTargets(r: BackendResult): TargetCheck[] {
  const out: TargetCheck[] = [];
  const check = (target: string, measured: string, met: boolean | undefined) =>
    out.push({ backend: r.backend, target, measured, met });
  const unc = sectionOf(r, "uncontended");
  const floor = unc ? floorRow(unc) : undefined;
  const coord = unc?.rows.find((x) => x.role === "coordinator");
  const session = unc?.rows.find((x) => x.role === "session");
  const pg = r.backend === "postgres";
  const limitTarget = `uncontended coordinator p50 <= ${UNCONTENDED_LIMIT}x floor${pg ? ` (on a floor p50 <= ${POSTGRES_FLOOR_P50_MS} ms)` : ""}`;
  if (floor && coord) {
    const ratio = coord.p50 / floor.p50;
    const s = session ? `; session ${(session.p50 / floor.p50).toFixed(2)}x` : "";
    const host = !pg
      ? ""
      : floor.p50 <= POSTGRES_FLOOR_P50_MS
        ? `; floor p50 ${ms(floor.p50)}, within the target's ${POSTGRES_FLOOR_P50_MS} ms`
        : `; floor p50 ${ms(floor.p50)}, over the target's ${POSTGRES_FLOOR_P50_MS} ms: this host is slower than the target assumes`;
    check(
      limitTarget,
      `${ratio.toFixed(2)}x (${ms(coord.p50)} vs ${ms(floor.p50)}${s}${host})`,
      ratio <= UNCONTENDED_LIMIT,
    );
  } else {
    check(limitTarget, "not measured", undefined);
  }
  const peers = unc?.rows.filter((x) => x.role === "peer") ?? [];
  if (coord) {
    for (const p of peers) {
      const ratio = coord.p50 / p.p50;
      const vs = `${ms(coord.p50)} vs ${ms(p.p50)} (${ratio.toFixed(2)}x)`;
      if (r.backend === "redis" && /redis-semaphore/.test(p.variant)) {
        check(
          `uncontended coordinator p50 <= ${REDIS_SEMAPHORE_LIMIT.toFixed(2)}x ${p.variant}'s`,
          vs,
          ratio <= REDIS_SEMAPHORE_LIMIT,
        );
      } else if (r.backend === "redis" && /redlock/.test(p.variant)) {
        check(
          `uncontended coordinator p50 at least ${Math.round((1 - REDLOCK_LIMIT) * 100)}% under ${p.variant}'s`,
          vs,
          ratio <= REDLOCK_LIMIT,
        );
      } else {
        check(`uncontended coordinator faster than ${p.variant} (p50)`, vs, coord.p50 < p.p50);
      }
    }
  }
  if (peers.length === 0) check("faster than each peer", "no peer library measured", undefined);
  if (CLIENT_CPU_BACKENDS.includes(r.backend)) {
    const target = `coordinator client CPU per acquire+release <= floor's + ${CLIENT_CPU_OVER_FLOOR_US} us`;
    if (floor?.clientCpuUs !== undefined && coord?.clientCpuUs !== undefined) {
      const over = coord.clientCpuUs - floor.clientCpuUs;
      check(
        target,
        `${signed(over)} (${us(coord.clientCpuUs)} vs ${us(floor.clientCpuUs)})`,
        over <= CLIENT_CPU_OVER_FLOOR_US,
      );
    } else {
      check(target, "not measured", undefined);
    }
  }
  {
    const target = `coordinator minus session <= ${CORE_SHARE_US} us per acquire+release (client CPU)`;
    const share = unc ? coreShareCheck(unc) : undefined;
    check(target, share?.measured ?? "not measured", share?.met);
  }
  const handoff = sectionOf(r, "handoff");
  const baton = handoff?.rows.find((x) => x.role === "coordinator");
  if (handoff?.floor && baton) {
    const ratio = baton.p50 / handoff.floor.p50;
    check(
      `handoff p50 <= ${HANDOFF_LIMIT}x floor's acquire+release p50`,
      `${ratio.toFixed(2)}x (${ms(baton.p50)} vs ${ms(handoff.floor.p50)})`,
      ratio <= HANDOFF_LIMIT,
    );
  } else {
    check(
      `handoff p50 <= ${HANDOFF_LIMIT}x floor's acquire+release p50`,
      "not measured",
      undefined,
    );
  }
  const held = r.held;
  const renewal = held?.renewals[0];
  if (held && renewal) {
    // Core renews once per interval; the count per renewal is free of the window's rounding.
    check(
      `renewal requests per interval per session <= ${RENEWAL_LIMIT} (${held.locks} locks held)`,
      `${renewal.perRenewal.toFixed(2)} per renewal, ${renewal.perInterval.toFixed(2)} per interval (${renewal.source})`,
      renewal.perRenewal <= RENEWAL_LIMIT,
    );
    const perLock = held.gcExposed ? held.heapBytesPerLock : held.rssBytesPerLock;
    check(
      `memory per held lock < ${MEMORY_LIMIT} B`,
      `${perLock.toFixed(0)} B (${held.gcExposed ? "heap+external after GC" : "RSS; no --expose-gc"})`,
      perLock < MEMORY_LIMIT,
    );
  } else {
    check(
      `renewal requests per interval per session <= ${RENEWAL_LIMIT}`,
      "not measured",
      undefined,
    );
    check(`memory per held lock < ${MEMORY_LIMIT} B`, "not measured", undefined);
  }
  return out;
}

/**
 * The permit figures' targets, for a backend whose guarantees declare semaphores: the
 * uncontended permit acquire + release within {@link PERMIT_LIMIT} of the floor's (and on
 * Redis within {@link REDIS_SEMAPHORE_PERMIT_LIMIT} of redis-semaphore's `Semaphore`) and one
 * renewal request per interval with 10,000 permits held; core's share and the handoff are
 * shown beside them with no target.
 */
export function checkPermitTargets(r: BackendResult): TargetCheck[] {
  if (r.semaphores !== true) return [];
  const out: TargetCheck[] = [];
  const check = (target: string, measured: string, met: boolean | undefined) =>
    out.push({ backend: r.backend, target, measured, met });
  const unc = sectionOf(r, "permit-uncontended");
  const floor = unc ? floorRow(unc) : undefined;
  const coord = unc?.rows.find((x) => x.role === "coordinator");
  const session = unc?.rows.find((x) => x.role === "session");
  {
    const target = `uncontended permit coordinator p50 <= ${PERMIT_LIMIT}x floor`;
    if (floor && coord) {
      const ratio = coord.p50 / floor.p50;
      const s = session ? `; session ${(session.p50 / floor.p50).toFixed(2)}x` : "";
      check(
        target,
        `${ratio.toFixed(2)}x (${ms(coord.p50)} vs ${ms(floor.p50)}${s})`,
        ratio <= PERMIT_LIMIT,
      );
    } else {
      const why = unc
        ? `no floor: ${r.permitNoFloor ?? "none written for this backend yet"}`
        : "not measured";
      check(target, why, undefined);
    }
  }
  if (r.backend === "redis") {
    const peer = unc?.rows.find((x) => x.role === "peer" && /redis-semaphore/.test(x.variant));
    const target = `uncontended permit coordinator p50 <= ${REDIS_SEMAPHORE_PERMIT_LIMIT.toFixed(2)}x redis-semaphore Semaphore's`;
    if (coord && peer) {
      const ratio = coord.p50 / peer.p50;
      check(
        target,
        `${ratio.toFixed(2)}x (${ms(coord.p50)} vs ${ms(peer.p50)})`,
        ratio <= REDIS_SEMAPHORE_PERMIT_LIMIT,
      );
    } else {
      check(target, "not measured", undefined);
    }
  }
  {
    // Shown for information: the semaphore figures have no target for core's share.
    const target = "permit coordinator minus session per acquire+release (client CPU; no target)";
    const share = unc ? coreShareCheck(unc) : undefined;
    check(target, share?.measured ?? "not measured", undefined);
  }
  {
    const handoff = sectionOf(r, "permit-handoff");
    const baton = handoff?.rows.find((x) => x.role === "coordinator");
    // Shown for information: the semaphore figures have no target for the handoff.
    const target = "permit handoff p50 against the floor's permit acquire+release p50 (no target)";
    if (handoff?.floor && baton) {
      const ratio = baton.p50 / handoff.floor.p50;
      check(
        target,
        `${ratio.toFixed(2)}x (${ms(baton.p50)} vs ${ms(handoff.floor.p50)})`,
        undefined,
      );
    } else {
      check(target, baton ? `no floor (handoff p50 ${ms(baton.p50)})` : "not measured", undefined);
    }
  }
  {
    const held = r.heldPermits;
    const renewal = held?.renewals[0];
    const target = `renewal requests per interval per session <= ${RENEWAL_LIMIT} (${held?.locks ?? 10_000} permits held)`;
    if (held && renewal) {
      check(
        target,
        `${renewal.perRenewal.toFixed(2)} per renewal, ${renewal.perInterval.toFixed(2)} per interval (${renewal.source})`,
        renewal.perRenewal <= RENEWAL_LIMIT,
      );
    } else {
      check(target, "not measured", undefined);
    }
  }
  return out;
}
