import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import {
  type Coordinator,
  createCoordinator,
  type Election,
  enablePrometheus,
  MemoryBackend,
  MemoryStore,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 5_000) => {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

async function value(registry: Registry, metric: string, name: string): Promise<number> {
  const metrics = await registry.getMetricsAsJSON();
  const m = metrics.find((x) => x.name === metric);
  const v = (
    m?.values as
      | { labels: Record<string, string>; value: number; metricName?: string }[]
      | undefined
  )?.find(
    (x) =>
      x.labels.name === name &&
      (x.metricName === undefined || x.metricName === metric || x.metricName.endsWith("_count")),
  );
  return v?.value ?? 0;
}

describe("Prometheus metrics", () => {
  it("in steady state the sum of baton_is_leader across instances is 1, through a handover", async () => {
    const store = new MemoryStore();
    const instances = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const coordinator = createCoordinator({
          backend: new ScriptedBackend({ store }),
          ttlMs: 300,
          ownerId: `n${i}`,
        });
        open.push(coordinator);
        const registry = new Registry();
        await enablePrometheus(coordinator, { registry });
        const election = coordinator.elect("scheduler", { onElected: () => undefined });
        return { coordinator, registry, election };
      }),
    );
    const sumLeaders = async () => {
      let sum = 0;
      for (const i of instances) sum += await value(i.registry, "baton_is_leader", "scheduler");
      return sum;
    };
    await until(async () => (await sumLeaders()) === 1);
    await new Promise((r) => setTimeout(r, 400));
    expect(await sumLeaders()).toBe(1);
    const leader = instances.find((i) => i.election.isLeader) as {
      election: Election;
      registry: Registry;
    };
    await leader.election.resign();
    await until(() => instances.some((i) => i !== leader && i.election.isLeader));
    await until(async () => (await sumLeaders()) === 1);
    let changes = 0;
    for (const i of instances)
      changes += await value(i.registry, "baton_leader_changes_total", "scheduler");
    expect(changes).toBeGreaterThanOrEqual(2);
    // Someone's watch saw the handover.
    let failovers = 0;
    for (const i of instances)
      failovers += await value(i.registry, "baton_failover_seconds", "scheduler");
    expect(failovers).toBeGreaterThanOrEqual(1);
  });

  it("counts renewal failures per lock and tracks lock_held", async () => {
    const backend = new ScriptedBackend();
    const coordinator = createCoordinator({ backend, ttlMs: 300 });
    open.push(coordinator);
    const registry = new Registry();
    await enablePrometheus(coordinator, { registry });
    const lock = await coordinator.acquire("report");
    expect(await value(registry, "baton_lock_held", "report")).toBe(1);
    backend.hooks.keepAlive = async () => {
      throw new Error("ECONNRESET");
    };
    await until(() => !lock.held);
    expect(await value(registry, "baton_renewal_failures_total", "report")).toBeGreaterThanOrEqual(
      1,
    );
    expect(await value(registry, "baton_lock_held", "report")).toBe(0);
  });

  it("keeps lock_held at 1 until the last permit of a semaphore ends", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend() });
    open.push(coordinator);
    const registry = new Registry();
    await enablePrometheus(coordinator, { registry });
    const exports = coordinator.semaphore("exports", { permits: 3 });
    const first = await exports.acquire();
    const second = await exports.acquire();
    await first.release();
    expect(await value(registry, "baton_lock_held", "exports")).toBe(1);
    await second.release();
    expect(await value(registry, "baton_lock_held", "exports")).toBe(0);
  });

  it("a per-second job over many slots keeps the series count constant", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend() });
    open.push(coordinator);
    const registry = new Registry();
    await enablePrometheus(coordinator, { registry });
    const runSlots = async (from: number, count: number) => {
      for (let i = from; i < from + count; i++) {
        // Named as a per-second schedule names its slots.
        const slot = new Date(Date.UTC(2026, 11, 6, 5, 0, i)).toISOString().slice(0, 19);
        const result = await coordinator.runOnce("tick", `${slot}Z`, () => i);
        expect(result.outcome).toBe("ran");
      }
    };
    await runSlots(0, 5);
    const before = await seriesCount(registry);
    await runSlots(5, 200);
    expect(await seriesCount(registry)).toBe(before);
    expect(await labelValues(registry, "baton_lock_acquire_seconds", "name")).toEqual([
      "tick/slot/*",
    ]);
    expect(await value(registry, "baton_lock_acquire_seconds", "tick/slot/*")).toBe(205);
  });

  it("removes a lock's lock_held series when it is released or lost", async () => {
    const backend = new ScriptedBackend();
    const coordinator = createCoordinator({ backend, ttlMs: 300 });
    open.push(coordinator);
    const registry = new Registry();
    await enablePrometheus(coordinator, { registry });
    const released = await coordinator.acquire("released");
    expect(await labelValues(registry, "baton_lock_held", "name")).toEqual(["released"]);
    await released.release();
    expect(await labelValues(registry, "baton_lock_held", "name")).toEqual([]);
    const lost = await coordinator.acquire("lost");
    expect(await labelValues(registry, "baton_lock_held", "name")).toEqual(["lost"]);
    backend.hooks.keepAlive = async () => {
      throw new Error("ECONNRESET");
    };
    await until(() => !lost.held);
    expect(await labelValues(registry, "baton_lock_held", "name")).toEqual([]);
  });

  it("counts names past maxNames under name=other, and maps names with labelName", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend() });
    open.push(coordinator);
    const registry = new Registry();
    await enablePrometheus(coordinator, {
      registry,
      maxNames: 3,
      labelName: (name) => (name.startsWith("invoice/") ? "invoice/*" : undefined),
    });
    const invoices = await Promise.all([1, 2, 3].map((i) => coordinator.acquire(`invoice/${i}`)));
    expect(await value(registry, "baton_lock_held", "invoice/*")).toBe(3);
    for (let i = 0; i < 10; i++) await (await coordinator.acquire(`report-${i}`)).release();
    expect(await labelValues(registry, "baton_lock_acquire_seconds", "name")).toEqual([
      "invoice/*",
      "other",
      "report-0",
      "report-1",
    ]);
    expect(await value(registry, "baton_lock_acquire_seconds", "other")).toBe(8);
    await invoices[0]?.release();
    expect(await value(registry, "baton_lock_held", "invoice/*")).toBe(2);
    await Promise.all(invoices.map((lock) => lock.release()));
    expect(await labelValues(registry, "baton_lock_held", "name")).toEqual([]);
  });

  it("names no generated name in a label: partitions are labelled by their set", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend() });
    open.push(coordinator);
    const registry = new Registry();
    await enablePrometheus(coordinator, { registry });
    const lock = await coordinator.acquire("orders/partition/7");
    expect(await labelValues(registry, "baton_lock_held", "name")).toEqual(["orders/partition/*"]);
    await lock.release();
  });
});

/** Every series the registry exposes. */
async function seriesCount(registry: Registry): Promise<number> {
  let count = 0;
  for (const metric of await registry.getMetricsAsJSON()) count += metric.values.length;
  return count;
}

/** The distinct values of `label` in `metric`'s series, sorted. */
async function labelValues(registry: Registry, metric: string, label: string): Promise<string[]> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === metric);
  const values = new Set<string>();
  for (const v of (m?.values ?? []) as { labels: Record<string, string | number> }[]) {
    const l = v.labels[label];
    if (l !== undefined) values.add(String(l));
  }
  return [...values].sort();
}
