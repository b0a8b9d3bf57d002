import { ConfigError } from "./contract/errors.js";
import type { Coordinator } from "./coordinator.js";
import { checkFunction } from "./helpers/validate.js";
import type { Lock } from "./kernel/lock.js";
import {
  BoundedNames,
  DEFAULT_MAX_METRIC_NAMES,
  defaultMetricName,
} from "./observability/metric-names.js";

/**
 * Where the metrics are registered: a prom-client `Registry` (or anything with its
 * `registerMetric`).
 */
export interface PrometheusRegistry {
  registerMetric(metric: never): void;
}

/** Options of {@link enablePrometheus}. */
export interface PrometheusOptions {
  /** A prom-client `Registry` (default: prom-client's global `register`). */
  readonly registry?: PrometheusRegistry;
  /** Metric name prefix. Default `"baton_"`. */
  readonly prefix?: string;
  /**
   * The `name` label value of a lock, semaphore or election name: return a value to group
   * names under (e.g. `(n) => n.replace(/^invoice\/.*$/, "invoice/*")`), or `undefined`
   * for the default: a runOnce or schedule slot's lock (`<job>/slot/<slot>`) is labelled
   * `<job>/slot/*`, a partition (`<name>/partition/<n>`) `<name>/partition/*`, any other
   * name itself.
   */
  readonly labelName?: (name: string) => string | undefined;
  /**
   * The `name` label value of a lock, semaphore or election name, or `undefined` to leave
   * the `name` label out of that name's series (they are then summed with every other name
   * left out). Names that carry a slot or a partition stay grouped whatever it returns: a
   * value `<job>/slot/<slot>` becomes `<job>/slot/*` and `<name>/partition/<n>` becomes
   * `<name>/partition/*`, so a runOnce or schedule slot never becomes a label value. A
   * function that throws leaves the label out. Pass it or `labelName`, not both.
   *
   * @example
   * // tenants' locks summed together, every other name as it is
   * metricName: (name) => (name.startsWith("tenant/") ? undefined : name)
   */
  readonly metricName?: (name: string) => string | undefined;
  /**
   * At most this many distinct values of the `name` label (and of the `job` label), each
   * kept for the life of the metrics; later ones are counted under `"other"`. Default 100.
   */
  readonly maxNames?: number;
}

/** What {@link enablePrometheus} returns. */
export interface PrometheusHandle {
  /** Stops updating the metrics and the election watches; the metrics stay registered. */
  stop(): void;
}

// Minimal structural views of prom-client, so this file compiles without it installed.
interface Labeled<T> {
  labels(labels: Record<string, string>): T;
  remove(labels: Record<string, string>): void;
}
interface GaugeLike extends Labeled<{ set(v: number): void }> {}
/** The labels of a series: `name` absent when {@link PrometheusOptions.metricName} drops it. */
type NameLabels = { name?: string };
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
 * - `baton_is_leader{name}`: how many elections of the label this instance leads (for a plain
 *   election name: 1 while it leads, summed over instances: 1).
 * - `baton_leader_changes_total{name}`: terms this instance started.
 * - `baton_renewal_failures_total{name}`: failed renewals, per lock that depended on them.
 * - `baton_lock_held{name}`: how many locks of the label this instance holds (for a plain
 *   name: 1 while it holds the lock, or any of its permits: a semaphore's, a read or a
 *   write); the series is removed when the last of them is released or lost.
 * - `baton_lock_acquire_seconds{name}`: histogram of time from acquire() to the grant.
 * - `baton_lock_wait_seconds{name,outcome}`: histogram of the waits for a taken lock (the
 *   acquires that found it held, here or elsewhere, and waited), from acquire() to the wait's
 *   end, by outcome (`acquired`, `timeout`, `aborted`, `error`).
 * - `baton_lock_hold_seconds{name}`: histogram of how long locks were held, from the grant
 *   to the release or the loss.
 * - `baton_lock_waiters{name}`: acquires of this instance waiting for a taken lock now.
 * - `baton_lock_contentions_total{name}`: acquires that found the lock taken (tries too).
 * - `baton_lock_revocations_total{name,side}`: locks an operator released by force:
 *   `side="holder"` counts this instance's locks revoked (a `lost` event with reason
 *   `revoked`), `side="operator"` the forced releases this instance made.
 * - `baton_failover_seconds{name}`: histogram of gaps with no leader, as this instance's
 *   watch of the election saw them (a direct handoff with no visible gap counts as 0).
 * - `baton_job_runs_total{job,outcome}`: `runOnce` calls and scheduled slots on this
 *   instance, by outcome (`ran`, `failed`, `already-done`, `running-elsewhere`,
 *   `attempts-exhausted`).
 * - `baton_job_last_success_timestamp_seconds{job}`: when a run of the job last finished
 *   here (Unix seconds); alert on its age, taking the maximum over instances.
 *
 * Label values stay few, whatever names the locks get: a slot's lock is labelled by its job
 * (`nightly/slot/*`, never one series per slot), a partition by its set, `metricName` (or
 * `labelName`) maps any other names or leaves the label out, and past `maxNames` distinct
 * values (default 100) further names are counted under `name="other"`. The series count is
 * therefore bounded: about 100 per `name` value (a histogram is 13 or 14 series per label
 * set, and the wait histogram has one label set per outcome) and 6 per `job` value.
 *
 * @example
 * // registry: prom-client's global `register`, or a `new Registry()` of yours
 * await enablePrometheus(coordinator, {
 *   registry,
 *   metricName: (name) => (name.startsWith("invoice/") ? "invoice/*" : name),
 * });
 */
export async function enablePrometheus(
  coordinator: Coordinator,
  options: PrometheusOptions = {},
): Promise<PrometheusHandle> {
  const labelName = options.labelName;
  if (labelName !== undefined) {
    checkFunction(labelName, "labelName", "must be a function (name) => string | undefined");
  }
  const metricName = options.metricName;
  if (metricName !== undefined) {
    checkFunction(metricName, "metricName", "must be a function (name) => string | undefined");
    if (labelName !== undefined) {
      throw new ConfigError(
        "metricName",
        "pass metricName or labelName, not both: metricName maps a name to its label value or to undefined (no name label)",
      );
    }
  }
  const maxNames = options.maxNames ?? DEFAULT_MAX_METRIC_NAMES;
  if (!Number.isInteger(maxNames) || maxNames < 1) {
    throw new ConfigError("maxNames", `must be a positive integer, got ${String(maxNames)}`);
  }
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
    help: "Elections of the label this instance leads",
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
    help: "Locks of the label this instance holds",
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

  const waitSeconds = new prom.Histogram({
    name: `${prefix}lock_wait_seconds`,
    help: "Waits for a taken lock, from acquire() to the wait's end, by outcome",
    labelNames: ["name", "outcome"],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
    registers,
  });
  const holdSeconds = new prom.Histogram({
    name: `${prefix}lock_hold_seconds`,
    help: "How long locks were held, from the grant to the release or the loss",
    labelNames,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
    registers,
  });
  const waiters = new prom.Gauge({
    name: `${prefix}lock_waiters`,
    help: "Acquires of this instance waiting for a taken lock",
    labelNames,
    registers,
  });
  const contentions = new prom.Counter({
    name: `${prefix}lock_contentions_total`,
    help: "Acquires that found the lock taken",
    labelNames,
    registers,
  });
  const revocations = new prom.Counter({
    name: `${prefix}lock_revocations_total`,
    help: "Locks released by force: this instance's revoked (holder), its forced releases (operator)",
    labelNames: ["name", "side"],
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

  const names = new BoundedNames(maxNames);
  const jobs = new BoundedNames(maxNames);
  const label = (name: string): NameLabels => {
    if (metricName !== undefined) {
      let mapped: unknown;
      try {
        mapped = metricName(name);
      } catch {
        mapped = undefined;
      }
      // Slots and partitions stay grouped whatever the mapping returns.
      return typeof mapped === "string" ? { name: names.admit(defaultMetricName(mapped)) } : {};
    }
    let mapped: string | undefined;
    try {
      mapped = labelName?.(name);
    } catch {
      mapped = undefined;
    }
    return { name: names.admit(typeof mapped === "string" ? mapped : defaultMetricName(name)) };
  };
  /** A label set's key in the maps below. */
  const keyOf = (labels: NameLabels): string => labels.name ?? NO_NAME;
  // Locks held and elections led, by label value: a gauge counts the names of its label
  // (a semaphore's permits share a name), and a lock gauge's series goes with the last one.
  const holding = new HoldsByLabel();
  const leading = new HoldsByLabel();
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
          failover.labels(label(name)).observe(goneAt === undefined ? 0 : (now - goneAt) / 1_000);
        }
        lastTerm = holder.token;
        goneAt = undefined;
      }
    } catch {
      // The watch ends with the coordinator or stop(); failures were reported as events.
    }
  };
  // When each lock held now was granted (performance.now()), for the hold histogram.
  const grantedAt = new WeakMap<Lock, number>();
  const unhold = (name: string, lock: Lock) => {
    const labels = label(name);
    const at = grantedAt.get(lock);
    if (at !== undefined) {
      grantedAt.delete(lock);
      holdSeconds.labels(labels).observe((performance.now() - at) / 1_000);
    }
    const count = holding.remove(keyOf(labels), name, lock);
    if (count === undefined) return;
    if (count === 0) held.remove(labels);
    else held.labels(labels).set(count);
  };
  // Waits under way, by label set.
  const waiting = new Map<string, number>();
  const countWaiter = (name: string, change: 1 | -1) => {
    const labels = label(name);
    const key = keyOf(labels);
    const count = Math.max(0, (waiting.get(key) ?? 0) + change);
    if (count === 0) waiting.delete(key);
    else waiting.set(key, count);
    waiters.labels(labels).set(count);
  };
  const unsubscribe = [
    coordinator.on("elected", ({ name }) => {
      const labels = label(name);
      isLeader.labels(labels).set(leading.add(keyOf(labels), name, name));
      changes.labels(labels).inc();
    }),
    coordinator.on("revoked", ({ name }) => {
      const labels = label(name);
      leading.remove(keyOf(labels), name, name);
      isLeader.labels(labels).set(leading.count(keyOf(labels)));
    }),
    coordinator.on("jobRun", ({ job, outcome }) => {
      const labels = { job: jobs.admit(job) };
      jobRuns.labels({ ...labels, outcome }).inc();
      if (outcome === "ran") lastSuccess.labels(labels).set(Date.now() / 1_000);
    }),
    coordinator.on("renewFailed", ({ names: failed }) => {
      for (const name of failed) renewalFailures.labels(label(name)).inc();
    }),
    coordinator.on("acquired", ({ name, waitedMs, lock }) => {
      const labels = label(name);
      grantedAt.set(lock, performance.now());
      held.labels(labels).set(holding.add(keyOf(labels), name, lock));
      acquireSeconds.labels(labels).observe(waitedMs / 1_000);
    }),
    coordinator.on("released", ({ name, lock }) => unhold(name, lock)),
    coordinator.on("lost", ({ name, lock, reason }) => {
      if (reason === "revoked") revocations.labels({ ...label(name), side: "holder" }).inc();
      unhold(name, lock);
    }),
    coordinator.on("contended", ({ name }) => contentions.labels(label(name)).inc()),
    coordinator.on("waitStarted", ({ name }) => countWaiter(name, 1)),
    coordinator.on("waitEnded", ({ name, waitedMs, outcome }) => {
      countWaiter(name, -1);
      waitSeconds.labels({ ...label(name), outcome }).observe(waitedMs / 1_000);
    }),
    coordinator.on("forceReleased", ({ name, released }) => {
      if (released) revocations.labels({ ...label(name), side: "operator" }).inc();
    }),
    coordinator.on("campaignStarted", ({ name }) => {
      const labels = label(name);
      isLeader.labels(labels).set(leading.count(keyOf(labels)));
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

/** The key of the label set without `name` in the maps by label (no name is empty). */
const NO_NAME = "";

/** What this instance holds (locks, permits, leaderships), by label value, then by name. */
class HoldsByLabel {
  readonly #byLabel = new Map<string, Map<string, Set<unknown>>>();

  /** Adds `hold` of `name`; returns how many names of `label` are held. */
  add(label: string, name: string, hold: unknown): number {
    let byName = this.#byLabel.get(label);
    if (byName === undefined) {
      byName = new Map();
      this.#byLabel.set(label, byName);
    }
    let holds = byName.get(name);
    if (holds === undefined) {
      holds = new Set();
      byName.set(name, holds);
    }
    holds.add(hold);
    return byName.size;
  }

  /**
   * Forgets `hold` of `name`; returns how many names of `label` are still held, or
   * `undefined` when that count did not change.
   */
  remove(label: string, name: string, hold: unknown): number | undefined {
    const byName = this.#byLabel.get(label);
    const holds = byName?.get(name);
    if (byName === undefined || holds === undefined || !holds.delete(hold)) return undefined;
    if (holds.size > 0) return undefined;
    byName.delete(name);
    if (byName.size === 0) this.#byLabel.delete(label);
    return byName.size;
  }

  /** How many names of `label` are held. */
  count(label: string): number {
    return this.#byLabel.get(label)?.size ?? 0;
  }
}
