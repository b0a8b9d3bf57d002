import type { Coordinator } from "./coordinator.js";
import { ConfigError } from "./errors.js";
import type { Lock } from "./lock.js";

/** Options of {@link enablePrometheus}. */
export interface PrometheusOptions {
  /** A prom-client `Registry` (default: prom-client's global `register`). */
  readonly registry?: unknown;
  /** Metric name prefix. Default `"baton_"`. */
  readonly prefix?: string;
}

/** What {@link enablePrometheus} returns. */
export interface PrometheusHandle {
  /** Stops updating the metrics and the election watches; the metrics stay registered. */
  stop(): void;
}

// Minimal structural views of prom-client, so this file compiles without it installed.
interface Labeled<T> {
  labels(labels: Record<string, string>): T;
}
interface GaugeLike extends Labeled<{ set(v: number): void }> {}
interface CounterLike extends Labeled<{ inc(v?: number): void }> {}
interface HistogramLike extends Labeled<{ observe(v: number): void }> {}
interface PromClient {
  register: unknown;
  Gauge: new (config: Record<string, unknown>) => GaugeLike;
  Counter: new (config: Record<string, unknown>) => CounterLike;
  Histogram: new (config: Record<string, unknown>) => HistogramLike;
}

/**
 * Exposes a coordinator's activity as Prometheus metrics through `prom-client` (an optional
 * peer dependency, loaded only here). Enable it before `elect()` so elections are watched.
 *
 * - `baton_is_leader{name}`: 1 while this instance leads `name` (summed over instances: 1).
 * - `baton_leader_changes_total{name}`: terms this instance started.
 * - `baton_renewal_failures_total{name}`: failed renewals, per lock that depended on them.
 * - `baton_lock_held{name}`: 1 while this instance holds the lock (or any of its permits: a
 *   semaphore's, a read or a write).
 * - `baton_lock_acquire_seconds{name}`: histogram of time from acquire() to the grant.
 * - `baton_failover_seconds{name}`: histogram of gaps with no leader, as this instance's
 *   watch of the election saw them (a direct handoff with no visible gap counts as 0).
 * - `baton_job_runs_total{job,outcome}`: `runOnce` calls and scheduled slots on this
 *   instance, by outcome (`ran`, `failed`, `already-done`, `running-elsewhere`,
 *   `attempts-exhausted`).
 * - `baton_job_last_success_timestamp_seconds{job}`: when a run of the job last finished
 *   here (Unix seconds); alert on its age, taking the maximum over instances.
 *
 * @example
 * import { register } from "prom-client";
 * await enablePrometheus(coordinator, { registry: register });
 */
export async function enablePrometheus(
  coordinator: Coordinator,
  options: PrometheusOptions = {},
): Promise<PrometheusHandle> {
  let prom: PromClient;
  try {
    prom = (await import("prom-client")) as unknown as PromClient;
  } catch (cause) {
    throw new ConfigError(
      "prom-client",
      "metrics need the prom-client package: npm install prom-client",
      {
        cause,
      },
    );
  }
  const prefix = options.prefix ?? "baton_";
  const registers = [options.registry ?? prom.register];
  const labelNames = ["name"];
  const isLeader = new prom.Gauge({
    name: `${prefix}is_leader`,
    help: "1 while this instance leads the election",
    labelNames,
    registers,
  });
  const changes = new prom.Counter({
    name: `${prefix}leader_changes_total`,
    help: "Terms this instance started",
    labelNames,
    registers,
  });
  const renewalFailures = new prom.Counter({
    name: `${prefix}renewal_failures_total`,
    help: "Failed session renewals, per lock that depended on them",
    labelNames,
    registers,
  });
  const held = new prom.Gauge({
    name: `${prefix}lock_held`,
    help: "1 while this instance holds the lock",
    labelNames,
    registers,
  });
  const acquireSeconds = new prom.Histogram({
    name: `${prefix}lock_acquire_seconds`,
    help: "Time from acquire() to the grant",
    labelNames,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
    registers,
  });
  const failover = new prom.Histogram({
    name: `${prefix}failover_seconds`,
    help: "Gaps with no leader, as this instance's watch saw them",
    labelNames,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60],
    registers,
  });

  const jobRuns = new prom.Counter({
    name: `${prefix}job_runs_total`,
    help: "runOnce calls and scheduled slots on this instance, by outcome",
    labelNames: ["job", "outcome"],
    registers,
  });
  const lastSuccess = new prom.Gauge({
    name: `${prefix}job_last_success_timestamp_seconds`,
    help: "When a run of the job last finished on this instance (Unix seconds)",
    labelNames: ["job"],
    registers,
  });

  // A semaphore's permits share a name: the gauge stays 1 until the last of them ends.
  const holding = new HoldsByName();
  const stop = new AbortController();
  const watched = new Set<string>();
  const watchElection = async (name: string) => {
    let lastTerm: bigint | undefined;
    let goneAt: number | undefined;
    try {
      for await (const holder of coordinator.watch(name, { signal: stop.signal })) {
        const now = performance.now();
        if (holder === null) {
          if (lastTerm !== undefined && goneAt === undefined) goneAt = now;
          continue;
        }
        if (lastTerm !== undefined && holder.token !== lastTerm) {
          failover.labels({ name }).observe(goneAt === undefined ? 0 : (now - goneAt) / 1_000);
        }
        lastTerm = holder.token;
        goneAt = undefined;
      }
    } catch {
      // The watch ends with the coordinator or stop(); failures were reported as events.
    }
  };

  const unsubscribe = [
    coordinator.on("elected", ({ name }) => {
      isLeader.labels({ name }).set(1);
      changes.labels({ name }).inc();
    }),
    coordinator.on("revoked", ({ name }) => isLeader.labels({ name }).set(0)),
    coordinator.on("jobRun", ({ job, outcome }) => {
      jobRuns.labels({ job, outcome }).inc();
      if (outcome === "ran") lastSuccess.labels({ job }).set(Date.now() / 1_000);
    }),
    coordinator.on("renewFailed", ({ names }) => {
      for (const name of names) renewalFailures.labels({ name }).inc();
    }),
    coordinator.on("acquired", ({ name, waitedMs, lock }) => {
      holding.add(name, lock);
      held.labels({ name }).set(1);
      acquireSeconds.labels({ name }).observe(waitedMs / 1_000);
    }),
    coordinator.on("released", ({ name, lock }) => {
      if (holding.remove(name, lock)) held.labels({ name }).set(0);
    }),
    coordinator.on("lost", ({ name, lock }) => {
      if (holding.remove(name, lock)) held.labels({ name }).set(0);
    }),
    coordinator.on("campaignStarted", ({ name }) => {
      isLeader.labels({ name }).set(0);
      if (watched.has(name)) return;
      watched.add(name);
      void watchElection(name);
    }),
  ];
  return {
    stop() {
      stop.abort();
      for (const off of unsubscribe) off();
    },
  };
}

/** The locks (or permits) this instance holds, by name. */
class HoldsByName {
  readonly #byName = new Map<string, Set<Lock>>();

  add(name: string, lock: Lock): void {
    let locks = this.#byName.get(name);
    if (locks === undefined) {
      locks = new Set();
      this.#byName.set(name, locks);
    }
    locks.add(lock);
  }

  /** Forgets `lock`; true when no other lock of `name` is held. */
  remove(name: string, lock: Lock): boolean {
    const locks = this.#byName.get(name);
    locks?.delete(lock);
    if (locks !== undefined && locks.size > 0) return false;
    this.#byName.delete(name);
    return true;
  }
}
