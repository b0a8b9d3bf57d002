import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runConformance } from "@baton/conformance";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import { AuthenticationError, createCoordinator, type Lock } from "@baton/core";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockKeys, RedisBackend, recordKey } from "../src/index.js";
import {
  closeNodeRedis,
  NODE_REDIS,
  type NodeRedisMajor,
  nodeRedisCluster,
  type TestNodeRedis,
} from "./node-redis-clients.js";

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
  /** Each node's address as it announces it (`CLUSTER SLOTS`, `MOVED`). */
  const announced = () => {
    if (cluster === undefined) throw new Error("redis cluster not started");
    return cluster.members.map((m) => {
      const [host, port] = m.address.split(":");
      return { host: host as string, port: Number(port) };
    });
  };

  runConformance(
    {
      name: "redis-cluster",
      ttlMs: 1_000,
      url,
      // The default key prefix, as in the worker processes, which are given the URL only.
      createBackend: () => new RedisBackend({ url: url() }),
      // A client connects to every node at the address the node announces: a proxy per node,
      // and natMap sends the client from each announced address to that node's proxy.
      proxiedBackend: async (proxy) => {
        const natMap: Record<string, { host: string; port: number }> = {};
        for (const node of announced()) natMap[`${node.host}:${node.port}`] = await proxy(node);
        const hosts = Object.values(natMap).map((p) => `${p.host}:${p.port}`);
        return new RedisBackend({ url: `redis://${hosts.join(",")}`, natMap });
      },
    },
    {
      fencing: "single-node",
      fifo: true,
      watch: true,
      crossProcess: true,
      semaphores: true,
      timeLeft: true,
    },
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

    it("records: each lives in the slot of the lock of the same name, records spread over the masters, with no expiry, and a wrong version writes nothing", async () => {
      const raw = new Cluster(announced());
      const backend = new RedisBackend({ url: url(), keyPrefix: "rec:" });
      const session = await backend.openSession({ ttlMs: 1_000, ownerId: "records" });
      const { readRecord, writeRecord } = session;
      if (readRecord === undefined || writeRecord === undefined) {
        throw new Error("a Redis Cluster session keeps records");
      }
      try {
        const names = Array.from({ length: 12 }, (_, i) => `nightly-${i}/slot/2026-12-01T02:00`);
        const slots = new Set<number>();
        const versions = new Map<string, string>();
        for (const n of names) {
          // Versions come from the server's clock, so they rise even across a restart.
          const first = await writeRecord.call(session, n, `running ${n}`, null);
          expect(first).toMatch(/^\d+$/);
          const second = await writeRecord.call(session, n, `done ${n}`, first as string);
          expect(second).toMatch(/^\d+$/);
          expect(BigInt(second as string)).toBeGreaterThan(BigInt(first as string));
          versions.set(n, second as string);
          // A stale version and "only if absent" write nothing.
          expect(await writeRecord.call(session, n, "stale", first as string)).toBeNull();
          expect(await writeRecord.call(session, n, "again", null)).toBeNull();
          const key = recordKey("rec:", n);
          const slot = Number(await raw.cluster("KEYSLOT", key));
          expect(Number(await raw.cluster("KEYSLOT", lockKeys("rec:", n).lock))).toBe(slot);
          slots.add(slot);
          expect(await raw.hgetall(key)).toEqual({ value: `done ${n}`, version: second });
          expect(await raw.pttl(key)).toBe(-1);
        }
        expect(slots.size).toBeGreaterThan(1);
        const perMaster = await Promise.all(
          raw.nodes("master").map(async (node) => (await node.keys("rec:records:*")).length),
        );
        expect(perMaster.filter((n) => n > 0).length).toBeGreaterThan(1);
        expect(perMaster.reduce((a, b) => a + b, 0)).toBe(names.length);
        await session.close();
        // Another session reads them, on whichever master each lives.
        const reader = await backend.openSession({ ttlMs: 1_000, ownerId: "reader" });
        for (const n of names) {
          expect(await reader.readRecord?.(n)).toEqual({
            value: `done ${n}`,
            version: versions.get(n),
          });
        }
        await reader.close();
      } finally {
        await session.close();
        await backend.close();
        raw.disconnect();
      }
    });

    it("a URL naming one node: every new backend opens its first session at once, connected to every master", async () => {
      const first = announced()[0] as { host: string; port: number };
      // The other masters are found through the first; their connections open as the client
      // learns the slots. Twenty fresh backends, so an open that only sometimes fails shows.
      for (let i = 0; i < 20; i++) {
        const backend = new RedisBackend({
          url: `redis://${first.host}:${first.port}?cluster=true`,
        });
        try {
          const session = await backend.openSession({ ttlMs: 1_000, ownerId: `one-node-${i}` });
          const masters = (backend.client as Cluster).nodes("master");
          expect(masters.map((n) => n.status)).toEqual(["ready", "ready", "ready"]);
          await session.close();
        } finally {
          await backend.close();
        }
      }
    });

    it("natMap: nodes found through the cluster are reached at their mapped addresses; locks on every master hold through them and are lost when they go dark", async () => {
      const nodes = announced();
      const proxies = await Promise.all(nodes.map((n) => TcpProxy.start(n)));
      const natMap = Object.fromEntries(
        nodes.map((n, i) => {
          const p = proxies[i] as TcpProxy;
          return [`${n.host}:${n.port}`, { host: p.host, port: p.port }];
        }),
      );
      // The URL names the first node's mapped address only; the client learns the others
      // from the cluster, at their announced addresses.
      const first = proxies[0] as TcpProxy;
      const backend = new RedisBackend({
        url: `redis://${first.host}:${first.port}?cluster=true`,
        natMap,
      });
      // A TTL with room for a slow renewal: the proxies run in this test's own process, which
      // shares two cores with the rest of the suite.
      const c = createCoordinator({ backend, ttlMs: 3_000 });
      const locks: Lock[] = [];
      try {
        for (let i = 0; i < 12; i++) locks.push(await c.acquire(`nat-${i}`));
        await new Promise((r) => setTimeout(r, 3_500)); // renewals, through the mapped addresses
        for (const l of locks) expect(l.held).toBe(true);
        for (const p of proxies) expect(p.connections).toBeGreaterThan(0);
        for (const p of proxies) p.blackhole();
        const deadline = performance.now() + 15_000;
        while (locks.some((l) => !l.signal.aborted) && performance.now() < deadline) {
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(locks.filter((l) => !l.signal.aborted).map((l) => l.name)).toEqual([]);
      } finally {
        for (const p of proxies) p.forward();
        await c.close();
        await backend.close();
        await Promise.all(proxies.map((p) => p.close()));
      }
    });
  });

  describe.each(Object.keys(NODE_REDIS) as NodeRedisMajor[])(
    "an app's own %s cluster client",
    (major) => {
      it("locks spread over the masters hold through renewals, a released lock goes to a waiter through its release message, records and permits work", async () => {
        const hosts = announced().map((n) => `${n.host}:${n.port}`);
        // The app lists one node; the client finds the others.
        const client = await nodeRedisCluster(major, hosts.slice(0, 1));
        const raw = new Cluster(announced());
        const prefix = `nr${major.replace(/\D/g, "")}:`;
        const backend = new RedisBackend({ client, keyPrefix: prefix });
        const a = createCoordinator({ backend, ttlMs: 3_000 });
        const b = createCoordinator({ backend, ttlMs: 30_000 });
        try {
          const names = Array.from({ length: 12 }, (_, i) => `spread-${i}`);
          const locks: Lock[] = [];
          for (const n of names) locks.push(await a.acquire(n));
          await new Promise((r) => setTimeout(r, 3_500)); // renewals, slot by slot
          for (const l of locks) expect(l.held).toBe(true);
          const perMaster = await Promise.all(
            raw
              .nodes("master")
              .map(async (node) => (await node.keys(`${prefix}{spread-*}:lock`)).length),
          );
          expect(perMaster.filter((n) => n > 0).length).toBeGreaterThan(1);
          expect(perMaster.reduce((x, y) => x + y, 0)).toBe(names.length);

          // A waiter in another coordinator wakes on the release, not the holder's lease.
          const held = await b.acquire("handoff");
          const waiting = a.acquire("handoff", { waitMs: 20_000 });
          await new Promise((r) => setTimeout(r, 300));
          const releasedAt = performance.now();
          expect(await held.release()).toBe(true);
          const next = await waiting;
          expect(performance.now() - releasedAt).toBeLessThan(15_000);
          expect(next.token).toBeGreaterThan(held.token as bigint);
          await next.release();
          for (const l of locks) expect(await l.release()).toBe(true);

          let runs = 0;
          const job = `nightly-${Date.now()}`;
          expect((await a.runOnce(job, "s1", () => ++runs)).outcome).toBe("ran");
          expect((await b.runOnce(job, "s1", () => ++runs)).outcome).toBe("already-done");
          expect(runs).toBe(1);
          const permit = await a.semaphore("exports", { permits: 1 }).acquire();
          expect(await b.semaphore("exports", { permits: 1 }).tryAcquire()).toBeNull();
          await permit.release();
        } finally {
          await a.close();
          await b.close();
          await backend.close();
          expect(client.isOpen).toBe(true);
          await closeNodeRedis(client);
          raw.disconnect();
        }
      });

      it("a cluster client whose password the nodes refuse fails with AuthenticationError naming `client`", async () => {
        const hosts = announced().map((n) => `${n.host}:${n.port}`);
        const user = `baton-nr-${major.replace(/\D/g, "")}`;
        for (const node of announced()) {
          const admin = new Redis({ ...node });
          await admin.call("ACL", "SETUSER", user, "reset", "on", ">right-Pa55", "~*", "+@all");
          admin.disconnect();
        }
        const create = NODE_REDIS[major].createCluster as (o: object) => TestNodeRedis;
        const client = create({
          rootNodes: hosts.map((h) => ({ url: `redis://${h}` })),
          defaults: { username: user, password: "wrong-Pa55" },
        });
        client.on("error", () => undefined);
        const backend = new RedisBackend({ client, commandTimeoutMs: 5_000 });
        const c = createCoordinator({ backend, ttlMs: 3_000 });
        try {
          const start = performance.now();
          const error = await c.acquire("auth", { waitMs: 20_000 }).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(AuthenticationError);
          expect((error as AuthenticationError).field).toBe("client");
          expect((error as Error).message).not.toContain("wrong-Pa55");
          expect(performance.now() - start).toBeLessThan(4_500);
        } finally {
          await c.close();
          await backend.close();
          await closeNodeRedis(client);
        }
      });
    },
  );
});
