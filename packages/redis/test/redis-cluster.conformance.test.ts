import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runConformance } from "@baton/conformance";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import { createCoordinator, type Lock } from "@baton/core";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockKeys, RedisBackend } from "../src/index.js";

// A private 3-master Redis Cluster (redis-server --cluster-enabled yes + redis-cli --cluster
// create), started here rather than in the global setup. Selected with the "redis" backend.
// The election group needs the URL when tests are registered, before this cluster exists, so
// it runs against the single node only (redis.conformance.test.ts).
describeBackend("redis", () => {
  let cluster: ServerGroup | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "baton-redis-cluster-"));
    cluster = await startRedisCluster({ dir });
  });
  afterAll(async () => {
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const url = () => {
    if (cluster === undefined) throw new Error("redis cluster not started");
    return cluster.url;
  };

  runConformance(
    {
      name: "redis-cluster",
      ttlMs: 1_000,
      url,
      createBackend: () => new RedisBackend({ url: url(), keyPrefix: "conf:" }),
    },
    { fencing: "single-node", fifo: true, watch: true, crossProcess: true },
  );

  describe("redis cluster specifics", () => {
    it("each lock's keys share a slot, locks spread over the masters, and one session holds them all through renewals", async () => {
      const group = cluster as ServerGroup;
      const nodes = group.members.map((m) => {
        const [host, port] = m.address.split(":");
        return { host: host as string, port: Number(port) };
      });
      const raw = new Cluster(nodes);
      const c = createCoordinator({ url: url(), ttlMs: 1_000 });
      try {
        const names = Array.from({ length: 12 }, (_, i) => `spread-${i}`);
        const slots = new Set<number>();
        for (const n of names) {
          const keys = lockKeys("baton:", n);
          const lockSlot = Number(await raw.cluster("KEYSLOT", keys.lock));
          expect(Number(await raw.cluster("KEYSLOT", keys.token))).toBe(lockSlot);
          slots.add(lockSlot);
        }
        expect(slots.size).toBeGreaterThan(1);
        const locks: Lock[] = [];
        for (const n of names) locks.push(await c.acquire(n));
        await new Promise((r) => setTimeout(r, 3_000));
        for (const l of locks) expect(l.held).toBe(true);
        // The locks live on more than one master: renewal crossed slots and nodes.
        const perMaster = await Promise.all(
          raw
            .nodes("master")
            .map(async (node) => (await node.keys("baton:{spread-*}:lock")).length),
        );
        expect(perMaster.filter((n) => n > 0).length).toBeGreaterThan(1);
        expect(perMaster.reduce((a, b) => a + b, 0)).toBe(names.length);
        for (const l of locks) expect(await l.release()).toBe(true);
      } finally {
        await c.close();
        raw.disconnect();
      }
    });
  });
});
