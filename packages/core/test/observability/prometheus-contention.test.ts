import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  enablePrometheus,
  ManualClock,
  MemoryBackend,
  MemoryStore,
} from "../../src/index.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

/** Two coordinators on one memory store, the first with its metrics in a registry of its own. */
async function pair(options: Parameters<typeof enablePrometheus>[1] = {}) {
  const store = new MemoryStore();
  const coordinator = createCoordinator({ backend: new MemoryBackend({ store }), ownerId: "a" });
  const other = createCoordinator({ backend: new MemoryBackend({ store }), ownerId: "b" });
  open.push(coordinator, other);
  const registry = new Registry();
  await enablePrometheus(coordinator, { registry, ...options });
  return { coordinator, other, registry };
}

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** The samples of `metric` (for a histogram, of its `<metric>_<suffix>` series). */
async function samples(registry: Registry, metric: string, suffix?: string): Promise<Sample[]> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === metric);
  const values = (found?.values ?? []) as Sample[];
  if (suffix === undefined) return values.map(({ labels, value }) => ({ labels, value }));
  return values
    .filter((v) => v.metricName === `${metric}_${suffix}`)
    .map(({ labels, value }) => ({ labels, value }));
}

describe("Prometheus contention, wait and hold metrics", () => {
  it("a contended acquire counts a contention, a waiter while it waits, a wait and a hold", async () => {
    const { coordinator, other, registry } = await pair();
    const holder = await other.acquire("reports");
    const waiting = coordinator.acquire("reports");
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(await samples(registry, "baton_lock_contentions_total")).toEqual([
      { labels: { name: "reports" }, value: 1 },
    ]);
    expect(await samples(registry, "baton_lock_waiters")).toEqual([
      { labels: { name: "reports" }, value: 1 },
    ]);
    await holder.release();
    const lock = await waiting;
    expect(await samples(registry, "baton_lock_waiters")).toEqual([
      { labels: { name: "reports" }, value: 0 },
    ]);
    expect(await samples(registry, "baton_lock_wait_seconds", "count")).toEqual([
      { labels: { name: "reports", outcome: "acquired" }, value: 1 },
    ]);
    const [waited] = await samples(registry, "baton_lock_wait_seconds", "sum");
    expect(waited?.value).toBeGreaterThan(0.02);
    expect(await samples(registry, "baton_lock_hold_seconds", "count")).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await lock.release();
    expect(await samples(registry, "baton_lock_hold_seconds", "count")).toEqual([
      { labels: { name: "reports" }, value: 1 },
    ]);
    const [held] = await samples(registry, "baton_lock_hold_seconds", "sum");
    expect(held?.value).toBeGreaterThan(0.01);
  });

  it("an uncontended acquire counts no contention and no wait; a timeout is a wait by outcome", async () => {
    const { coordinator, other, registry } = await pair();
    await (await coordinator.acquire("free")).release();
    expect(await samples(registry, "baton_lock_contentions_total")).toEqual([]);
    expect(await samples(registry, "baton_lock_wait_seconds", "count")).toEqual([]);
    await other.acquire("busy");
    await coordinator.acquire("busy", { waitMs: 20 }).catch(() => undefined);
    expect(await coordinator.tryAcquire("busy")).toBeNull();
    expect(await samples(registry, "baton_lock_contentions_total")).toEqual([
      { labels: { name: "busy" }, value: 2 },
    ]);
    expect(await samples(registry, "baton_lock_wait_seconds", "count")).toEqual([
      { labels: { name: "busy", outcome: "timeout" }, value: 1 },
    ]);
  });

  it("metricName maps names, leaves the label out on undefined, and keeps slots grouped", async () => {
    const { coordinator, other, registry } = await pair({
      metricName: (name) => (name.startsWith("tenant/") ? undefined : name),
    });
    await other.acquire("tenant/17");
    expect(await coordinator.tryAcquire("tenant/17")).toBeNull();
    expect(await coordinator.tryAcquire("tenant/17")).toBeNull();
    await other.acquire("nightly/slot/2026-12-06T05:00:00Z");
    expect(await coordinator.tryAcquire("nightly/slot/2026-12-06T05:00:00Z")).toBeNull();
    expect(await samples(registry, "baton_lock_contentions_total")).toEqual([
      { labels: {}, value: 2 },
      { labels: { name: "nightly/slot/*" }, value: 1 },
    ]);
    const lock = await coordinator.acquire("tenant/18");
    expect(await samples(registry, "baton_lock_held")).toEqual([{ labels: {}, value: 1 }]);
    await lock.release();
    expect(await samples(registry, "baton_lock_held")).toEqual([]);
  });

  it("counts a forced release on the holder's side and on the operator's", async () => {
    const clock = new ManualClock();
    const backend = new MemoryBackend({ clock });
    const coordinator = (ownerId: string) => {
      const c = createCoordinator({ backend, clock, ttlMs: 3_000, ownerId, closeBackend: false });
      open.push(c);
      return c;
    };
    const holder = coordinator("holder");
    const operator = coordinator("operator");
    const holderMetrics = new Registry();
    const operatorMetrics = new Registry();
    await enablePrometheus(holder, { registry: holderMetrics });
    await enablePrometheus(operator, { registry: operatorMetrics });
    const lock = await holder.acquire("invoices");
    const result = await operator.forceRelease("invoices", { reason: "stuck" });
    expect(result.released).toBe(true);
    // Nothing held it any more: no revocation to count.
    await operator.forceRelease("invoices", { reason: "stuck" });
    await clock.advance(1_000); // the holder's next renewal learns of it
    expect(lock.held).toBe(false);
    expect(await samples(holderMetrics, "baton_lock_revocations_total")).toEqual([
      { labels: { name: "invoices", side: "holder" }, value: 1 },
    ]);
    expect(await samples(operatorMetrics, "baton_lock_revocations_total")).toEqual([
      { labels: { name: "invoices", side: "operator" }, value: 1 },
    ]);
    expect(await samples(holderMetrics, "baton_lock_hold_seconds", "count")).toEqual([
      { labels: { name: "invoices" }, value: 1 },
    ]);
  });

  it("refuses metricName together with labelName, or one that is no function", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend() });
    open.push(coordinator);
    const both = enablePrometheus(coordinator, {
      registry: new Registry(),
      metricName: (name) => name,
      labelName: (name) => name,
    });
    await expect(both).rejects.toBeInstanceOf(ConfigError);
    await expect(both).rejects.toMatchObject({ field: "metricName" });
    await expect(
      enablePrometheus(coordinator, {
        registry: new Registry(),
        metricName: "name" as unknown as (name: string) => string,
      }),
    ).rejects.toMatchObject({ field: "metricName" });
  });
});
