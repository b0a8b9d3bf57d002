import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  fairShare,
  MemoryStore,
  type Partitions,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

const TTL = 300;

function instance(
  store: MemoryStore,
  ownerId: string,
): { coordinator: Coordinator; backend: ScriptedBackend } {
  const backend = new ScriptedBackend({ store });
  const coordinator = createCoordinator({ backend, ttlMs: TTL, ownerId });
  open.push(coordinator);
  return { coordinator, backend };
}

const until = async (check: () => boolean, timeoutMs = 10_000) => {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

function track(coordinator: Coordinator, count: number) {
  const assigned: number[] = [];
  const revoked: { partition: number; reason: string }[] = [];
  const set: Partitions = coordinator.partitions("orders", {
    count,
    onAssigned: (p) => {
      assigned.push(p);
    },
    onRevoked: (partition, { reason }) => {
      revoked.push({ partition, reason });
    },
  });
  return { set, assigned, revoked };
}

describe("partitions", () => {
  it("fair shares add up to the count and differ by at most one", () => {
    for (const [count, members] of [
      [4, 2],
      [4, 3],
      [7, 3],
      [3, 5],
      [1, 1],
    ] as const) {
      const shares = Array.from({ length: members }, (_, r) => fairShare(count, members, r));
      expect(shares.reduce((a, b) => a + b, 0)).toBe(count);
      expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
    }
  });

  it("4 partitions over 2 instances end 2 and 2, each partition with exactly one owner", async () => {
    const store = new MemoryStore();
    const a = track(instance(store, "a").coordinator, 4);
    await until(() => a.set.owned().length === 4); // alone, it owns everything
    const b = track(instance(store, "b").coordinator, 4);
    await until(() => a.set.owned().length === 2 && b.set.owned().length === 2);
    expect([...a.set.owned(), ...b.set.owned()].sort()).toEqual([0, 1, 2, 3]);
    expect(a.revoked.every((r) => r.reason === "rebalanced")).toBe(true);
    // Stable: more balancing rounds change nothing.
    await new Promise((r) => setTimeout(r, TTL * 2));
    expect(a.set.owned().length + b.set.owned().length).toBe(4);
    expect(b.revoked).toEqual([]);
  });

  it("when an instance dies, the survivor takes its partitions within TTL plus slack", async () => {
    const store = new MemoryStore();
    const a = track(instance(store, "a").coordinator, 4);
    const dying = instance(store, "b");
    const b = track(dying.coordinator, 4);
    await until(() => a.set.owned().length === 2 && b.set.owned().length === 2);
    // b's process stops reaching the store: renewals and acquires fail from now on.
    const dead = async () => {
      throw new Error("ECONNREFUSED");
    };
    dying.backend.hooks.keepAlive = dead;
    dying.backend.hooks.acquire = dead;
    dying.backend.hooks.openSession = dead;
    const diedAt = performance.now();
    await until(() => a.set.owned().length === 4, TTL * 10);
    expect(performance.now() - diedAt).toBeLessThan(TTL * 10);
    await until(() => b.set.owned().length === 0);
  });

  it("close() gives every partition back, onRevoked runs before it resolves", async () => {
    const store = new MemoryStore();
    const a = track(instance(store, "a").coordinator, 3);
    await until(() => a.set.owned().length === 3);
    await a.set.close();
    expect(a.revoked.map((r) => r.reason)).toEqual(["closed", "closed", "closed"]);
    expect(a.set.owned()).toEqual([]);
    const b = track(instance(store, "b").coordinator, 3);
    await until(() => b.set.owned().length === 3);
  });

  it("bad options are a ConfigError naming the field", () => {
    const { coordinator } = instance(new MemoryStore(), "a");
    expect(() => coordinator.partitions("p", { count: 0, onAssigned: () => undefined })).toThrow(
      expect.objectContaining({ field: "count" }),
    );
    expect(() => coordinator.partitions("p", { count: 2 } as never)).toThrow(
      expect.objectContaining({ field: "onAssigned" }),
    );
    expect(() =>
      coordinator.partitions("x".repeat(250), { count: 2, onAssigned: () => undefined }),
    ).toThrow(ConfigError);
  });
});
