import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { History, RecordedCoordinator } from "@baton/conformance/history";
import { type Coordinator, createCoordinator } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend } from "../src/index.js";
import {
  connectString,
  expectCleanHistory,
  expectForeignHoldsOffBaton,
  INTEROP_TEST_MS,
  queuedCount,
  RecordedInteropWorker,
  stillPending,
} from "./interop/interop-steps.js";
import {
  type InteropWorker,
  type InteropWorkerOptions,
  spawnInteropWorker,
} from "./interop/spawn-interop-worker.js";
import { currentChildrenOf, inspector, removeTree, waitUntil } from "./support/counting-clients.js";

// kazoo 2.8 (Lock, Election) in Python processes, contending with Baton on one ZooKeeper path.
// kazoo's Lock waits for Baton's `-lock-` nodes only when given extra_lock_patterns=["-lock-"].
describeBackend("zookeeper", (url) => {
  const prefix = `ik${randomUUID().slice(0, 8)}`;
  const dirOf = (name: string) => `/${prefix}/${encodeLockName(name)}`;
  let raw: Client;
  let backend: ZookeeperBackend;
  let baton: Coordinator;
  let lockWorker: InteropWorker;
  const workers: InteropWorker[] = [];
  const coordinators: Coordinator[] = [];
  const coordinator = (ownerId: string) => {
    const c = createCoordinator({ backend, closeBackend: false, ttlMs: 10_000, ownerId });
    coordinators.push(c);
    return c;
  };
  const kazoo = async (
    options: Pick<InteropWorkerOptions, "recipe" | "id"> & Partial<InteropWorkerOptions>,
    name: string,
  ) => {
    const w = await spawnInteropWorker({
      library: "kazoo",
      connect: connectString(url),
      path: dirOf(name),
      ...options,
    });
    workers.push(w);
    return w;
  };

  beforeAll(async () => {
    raw = await inspector(connectString(url));
    backend = ZookeeperBackend.fromUrl(url, { prefix });
    baton = coordinator("baton-node");
    lockWorker = await kazoo({ recipe: "lock", id: "kazoo-service" }, "interop-a");
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.stop()));
    await Promise.allSettled(coordinators.map((c) => c.close()));
    await backend?.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw?.close();
  });

  describe("kazoo's Lock with extra_lock_patterns=['-lock-']", { timeout: INTEROP_TEST_MS }, () => {
    const name = "interop-a";

    it("waits for Baton's holder and takes the lock when Baton releases it", async () => {
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const k = new RecordedInteropWorker(history, lockWorker, name);
      const lock = await b.acquire(name);
      const waiting = k.acquire(30_000);
      await lockWorker.queued();
      expect(await stillPending(waiting, 500)).toBe(true);
      const releasing = performance.now();
      await b.release(lock);
      const hold = await waiting;
      console.info(`Baton -> kazoo hand-off: ${Math.round(hold.at - releasing)} ms`);
      expect(hold.token).toBeGreaterThan(lock.token);
      await k.release();
      expectCleanHistory(history);
    });

    it("holds off Baton: tryAcquire refuses, acquire waits and gets the lock on release", async () => {
      await expectForeignHoldsOffBaton(baton, lockWorker, "kazoo", name, raw, dirOf(name));
    });

    it("hands the lock on along one queue: Baton, kazoo, another Baton, twice", async () => {
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const b2 = new RecordedCoordinator(history, "baton-2", coordinator("baton-2"));
      const k = new RecordedInteropWorker(history, lockWorker, name);
      for (let round = 0; round < 2; round++) {
        const lock = await b.acquire(name);
        const waiting = k.acquire(30_000);
        await lockWorker.queued();
        const batonNext = b2.acquire(name, { waitMs: 30_000 });
        await queuedCount(raw, dirOf(name), 3, `round ${round}: Baton queues behind kazoo`);
        await b.release(lock);
        await waiting;
        expect(await stillPending(batonNext, 300)).toBe(true);
        await k.release();
        await b2.release(await batonNext);
      }
      expectCleanHistory(history);
      expect(await currentChildrenOf(raw, dirOf(name))).toEqual([]);
    });

    it("a SIGKILLed kazoo holder keeps the lock until its session expires, then Baton gets it", async () => {
      const victim = await kazoo(
        { recipe: "lock", id: "kazoo-killed", sessionTimeoutMs: 4000 },
        "interop-kill",
      );
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const k = new RecordedInteropWorker(history, victim, "interop-kill");
      await k.acquire(30_000);
      const waiting = b.acquire("interop-kill", { waitMs: 60_000 });
      await queuedCount(raw, dirOf("interop-kill"), 2, "kazoo holds, Baton waits");
      const killedAt = performance.now();
      await k.kill();
      const lock = await waiting;
      const waited = performance.now() - killedAt;
      console.info(`SIGKILLed kazoo -> Baton: ${Math.round(waited)} ms`);
      // The server keeps the session for its timeout (4 s asked; at least 2/3 of it passes
      // after the last heartbeat): the dead holder's node still excluded Baton meanwhile.
      expect(waited).toBeGreaterThan(1500);
      await b.release(lock);
      expectCleanHistory(history);
    });
  });

  describe("kazoo's Lock without extra_lock_patterns", { timeout: INTEROP_TEST_MS }, () => {
    it("does not wait for Baton's holder (kazoo orders only its own nodes), but Baton waits for it", async () => {
      const name = "interop-plain";
      const plain = await kazoo({ recipe: "lock", id: "kazoo-plain", extraLockPatterns: [] }, name);
      const lock = await baton.acquire(name);
      // kazoo takes the lock Baton holds: the reason kazoo must pass extra_lock_patterns.
      const hold = await plain.acquire(30_000);
      expect(lock.held).toBe(true);
      await plain.release();
      await lock.release();
      // The other way round, Baton sees kazoo's node and waits for it.
      const second = await plain.acquire(30_000);
      expect(await baton.tryAcquire(name)).toBeNull();
      expect((await baton.holder(name))?.token).toBe(second.token);
      await plain.release();
      expect(hold.node).toMatch(/^[0-9a-f]{32}__lock__\d{10}$/);
    });
  });

  describe("kazoo's Election", { timeout: INTEROP_TEST_MS }, () => {
    const elect = (c: Coordinator, name: string) => c.elect(name, { onElected: () => undefined });

    it("as kazoo builds it: Baton's elect() waits for a kazoo leader, a kazoo contender does not wait for Baton's", async () => {
      const name = "interop-election";
      const k = await kazoo({ recipe: "election", id: "kazoo-leader" }, name);
      const leading = await k.acquire(30_000);
      const election = elect(coordinator("baton-elector"), name);
      try {
        await queuedCount(raw, dirOf(name), 2, "Baton campaigns behind kazoo's leader");
        await new Promise((r) => setTimeout(r, 1000));
        expect(election.isLeader).toBe(false);
        expect((await election.leader())?.term).toBe(leading.token);
        await k.release();
        await waitUntil(() => election.isLeader, 30_000, "Baton leads once kazoo resigns");
        // kazoo's Election passes no extra_lock_patterns: it wins while Baton leads.
        await k.acquire(30_000);
        expect(election.isLeader).toBe(true);
        await k.release();
      } finally {
        await election.close();
      }
    });

    it("with its lock given extra_lock_patterns=['-lock-'], kazoo and Baton lead one at a time", async () => {
      const name = "interop-election-patterns";
      const history = new History();
      const k = new RecordedInteropWorker(
        history,
        await kazoo(
          { recipe: "election", id: "kazoo-elector", extraLockPatterns: ["-lock-"] },
          name,
        ),
        name,
      );
      let ended: () => void = () => undefined;
      // A resigning leader's term ends, as a release does, when it asks to give it up: its
      // signal aborts only once the store has deleted its node, which may be after the next
      // leader was told so.
      let resignedAt: number | undefined;
      const election = coordinator("baton-elector-2").elect(name, {
        onElected: ({ term, signal }) => {
          history.invokeAcquire("baton", name).ok(term);
          signal.addEventListener("abort", () => {
            history.invokeRelease("baton", name, resignedAt).done(true);
            resignedAt = undefined;
            ended();
          });
        },
      });
      try {
        await waitUntil(() => election.isLeader, 30_000, "Baton leads");
        const waiting = k.acquire(30_000);
        await k.worker.queued();
        expect(await stillPending(waiting, 500)).toBe(true);
        const revoked = new Promise<void>((r) => {
          ended = r;
        });
        resignedAt = history.now();
        await election.resign();
        await revoked;
        const leading = await waiting;
        expect((await election.leader())?.term).toBe(leading.token);
        await k.release();
        await waitUntil(() => election.isLeader, 30_000, "Baton leads again");
        expectCleanHistory(history);
      } finally {
        await election.close();
      }
    });
  });
});
