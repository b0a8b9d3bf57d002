import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { History, RecordedCoordinator } from "@baton/conformance/history";
import { type Coordinator, createCoordinator, type Holder } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend } from "../src/index.js";
import {
  connectString,
  expectCleanHistory,
  expectForeignHoldsOffBaton,
  INTEROP_TEST_MS,
  nodeExists,
  queuedCount,
  RecordedInteropWorker,
  stillPending,
} from "./interop/interop-steps.js";
import { type InteropWorker, spawnInteropWorker } from "./interop/spawn-interop-worker.js";
import { currentChildrenOf, inspector, removeTree, waitUntil } from "./support/counting-clients.js";

// Curator 5.4 (InterProcessMutex, LeaderSelector, LeaderLatch) in a JVM, contending with
// Baton on one ZooKeeper path. One worker serves every step, each with its recipe and path (a
// JVM takes one to several seconds to start); only the SIGKILL test starts another.
describeBackend("zookeeper", (url) => {
  const prefix = `ic${randomUUID().slice(0, 8)}`;
  const dirOf = (name: string) => `/${prefix}/${encodeLockName(name)}`;
  let raw: Client;
  let backend: ZookeeperBackend;
  let baton: Coordinator;
  let curatorWorker: InteropWorker;
  const coordinators: Coordinator[] = [];
  const coordinator = (ownerId: string) => {
    const c = createCoordinator({ backend, closeBackend: false, ttlMs: 10_000, ownerId });
    coordinators.push(c);
    return c;
  };

  beforeAll(async () => {
    const connect = connectString(url);
    raw = await inspector(connect);
    backend = ZookeeperBackend.fromUrl(url, { prefix });
    baton = coordinator("baton-node");
    curatorWorker = await spawnInteropWorker({
      library: "curator",
      recipe: "lock",
      connect,
      path: dirOf("interop-a"),
      id: "curator-service",
    });
  }, 120_000);
  afterAll(async () => {
    await curatorWorker?.stop();
    await Promise.allSettled(coordinators.map((c) => c.close()));
    await backend?.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw?.close();
  });

  describe("Curator's InterProcessMutex", { timeout: INTEROP_TEST_MS }, () => {
    const name = "interop-a";

    it("waits for Baton's holder and takes the lock when Baton releases it", async () => {
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const curator = new RecordedInteropWorker(history, curatorWorker, name);
      const lock = await b.acquire(name);
      const waiting = curator.acquire(30_000);
      await queuedCount(raw, dirOf(name), 2, "Baton holds, Curator waits");
      expect(await stillPending(waiting, 500)).toBe(true);
      const releasedAt = performance.now();
      await b.release(lock);
      const hold = await waiting;
      expect(hold.token).toBeGreaterThan(lock.token);
      console.info(`Baton -> Curator hand-off: ${Math.round(hold.at - releasedAt)} ms`);
      await curator.release();
      expectCleanHistory(history);
    });

    it("holds off Baton: tryAcquire refuses, acquire waits and gets the lock on release", async () => {
      await expectForeignHoldsOffBaton(baton, curatorWorker, "Curator", name, raw, dirOf(name));
    });

    it("hands the lock on along one queue: Baton, Curator, another Baton, twice", async () => {
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const b2 = new RecordedCoordinator(history, "baton-2", coordinator("baton-2"));
      const curator = new RecordedInteropWorker(history, curatorWorker, name);
      for (let round = 0; round < 2; round++) {
        const lock = await b.acquire(name);
        const waiting = curator.acquire(30_000);
        await queuedCount(raw, dirOf(name), 2, `round ${round}: Curator waits for Baton`);
        const batonNext = b2.acquire(name, { waitMs: 30_000 });
        await queuedCount(raw, dirOf(name), 3, `round ${round}: Baton queues behind Curator`);
        await b.release(lock);
        await waiting;
        expect(await stillPending(batonNext, 300)).toBe(true);
        await curator.release();
        await b2.release(await batonNext);
      }
      expectCleanHistory(history);
      expect(await currentChildrenOf(raw, dirOf(name))).toEqual([]);
    });

    it("holder() and watch() show Curator's holder with its node's token", async () => {
      const seen: (Holder | null)[] = [];
      const stop = new AbortController();
      const watching = (async () => {
        for await (const h of baton.watch(name, { signal: stop.signal })) seen.push(h);
      })();
      await waitUntil(() => seen.length > 0, 30_000, "watch() reports the free lock");
      const hold = await curatorWorker.acquire(30_000);
      const holder = await baton.holder(name);
      expect(holder).toMatchObject({ token: hold.token });
      await waitUntil(
        () => seen.some((h) => h?.token === hold.token),
        30_000,
        "watch() reports Curator's holder",
      );
      await curatorWorker.release();
      await waitUntil(() => seen.at(-1) === null, 30_000, "watch() reports the lock free again");
      expect(await baton.holder(name)).toBeNull();
      stop.abort();
      await watching;
    });

    it("a SIGKILLed Curator holder keeps the lock until its session expires, then Baton gets it", async () => {
      // Its own worker: the shared one dies here.
      const victim = await spawnInteropWorker({
        library: "curator",
        recipe: "lock",
        connect: connectString(url),
        path: dirOf("interop-kill"),
        id: "curator-killed",
        sessionTimeoutMs: 4000,
      });
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const curator = new RecordedInteropWorker(history, victim, "interop-kill");
      await curator.acquire(30_000);
      const waiting = b.acquire("interop-kill", { waitMs: 60_000 });
      await queuedCount(raw, dirOf("interop-kill"), 2, "Curator holds, Baton waits");
      const killedAt = performance.now();
      await curator.kill();
      const lock = await waiting;
      const waited = performance.now() - killedAt;
      console.info(`SIGKILLed Curator -> Baton: ${Math.round(waited)} ms`);
      // The server keeps the session for its timeout (4 s asked; at least 2/3 of it passes
      // after the last heartbeat): the dead holder's node still excluded Baton meanwhile.
      expect(waited).toBeGreaterThan(1500);
      expect(lock.held).toBe(true);
      await b.release(lock);
      expectCleanHistory(history);
    });
  });

  describe("a lock parent Curator creates (a container node)", { timeout: INTEROP_TEST_MS }, () => {
    // ZooKeeper deletes an emptied container at its next check: every second on the test
    // ensemble (znode.container.checkIntervalMs=1000), every minute by default.
    const lockOn = (history: History, name: string) =>
      new RecordedInteropWorker(history, curatorWorker, name, { path: dirOf(name) });
    const gone = (name: string, what: string) =>
      waitUntil(async () => !(await nodeExists(raw, dirOf(name))), 30_000, what);
    let probes = 0;
    /** Resolves once ZooKeeper has run a container check that began after the call. */
    const containerCheck = async () => {
      const probe = `interop-container-probe-${++probes}`;
      await curatorWorker.acquire(30_000, { path: dirOf(probe) });
      await curatorWorker.release();
      await gone(probe, "ZooKeeper deletes the probe's emptied container");
    };

    it("once Curator leaves it and ZooKeeper deletes it, Baton acquires, holds, watches and releases there", async () => {
      const name = "interop-container";
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const curator = lockOn(history, name);
      const seen: (Holder | null)[] = [];
      const stop = new AbortController();
      const watching = (async () => {
        for await (const h of baton.watch(name, { signal: stop.signal })) seen.push(h);
      })();
      try {
        await waitUntil(() => seen.length > 0, 30_000, "watch() reports the free lock");
        const hold = await curator.acquire(30_000);
        await waitUntil(
          () => seen.some((h) => h?.foreign === "curator" && h.token === hold.token),
          30_000,
          "watch() reports Curator's holder",
        );
        await curator.release();
        await gone(name, "ZooKeeper deletes the container Curator emptied");
        expect(await baton.holder(name)).toBeNull();

        const lock = await b.acquire(name, { waitMs: 30_000 });
        expect(lock.token).toBeGreaterThan(hold.token);
        expect(await baton.holder(name)).toMatchObject({
          ownerId: "baton-node",
          token: lock.token,
        });
        await waitUntil(
          () => seen.some((h) => h?.ownerId === "baton-node" && h.token === lock.token),
          30_000,
          "watch() reports Baton's holder in the new parent",
        );
        expect(lock.held).toBe(true);
        await b.release(lock);
        await waitUntil(() => seen.at(-1) === null, 30_000, "watch() reports the lock free again");
        // Baton re-created the parent as a persistent node: it stays once emptied.
        await containerCheck();
        expect(await nodeExists(raw, dirOf(name))).toBe(true);
      } finally {
        stop.abort();
        await watching;
      }
      expect(seen.filter((h) => h !== null).map((h) => h?.foreign ?? h?.ownerId)).toEqual([
        "curator",
        "baton-node",
      ]);
      expectCleanHistory(history);
    });

    it("stays while Baton waits and holds in it after Curator, and goes once Baton releases", async () => {
      const name = "interop-container-shared";
      const history = new History();
      const b = new RecordedCoordinator(history, "baton", baton);
      const curator = lockOn(history, name);
      const hold = await curator.acquire(30_000);
      expect(await b.tryAcquire(name)).toBeNull();
      const waiting = b.acquire(name, { waitMs: 30_000 });
      await queuedCount(raw, dirOf(name), 2, "Curator holds, Baton waits in Curator's container");
      await curator.release();
      const lock = await waiting;
      expect(lock.token).toBeGreaterThan(hold.token);

      // A container check runs while Baton holds: it leaves the container with Baton's node.
      await containerCheck();
      expect(await nodeExists(raw, dirOf(name))).toBe(true);
      expect(lock.held).toBe(true);
      expect(await baton.holder(name)).toMatchObject({ ownerId: "baton-node", token: lock.token });

      await b.release(lock);
      await gone(name, "ZooKeeper deletes the container Baton emptied");
      // And Baton takes the lock again on the path ZooKeeper cleared.
      const again = await b.acquire(name, { waitMs: 30_000 });
      expect(again.token).toBeGreaterThan(lock.token);
      await b.release(again);
      expectCleanHistory(history);
    });
  });

  describe("Curator's LeaderSelector", { timeout: INTEROP_TEST_MS }, () => {
    const name = "interop-selector";

    it("and Baton's elect() on one path lead one at a time, handing leadership over both ways", async () => {
      const history = new History();
      const curator = new RecordedInteropWorker(history, curatorWorker, name, {
        path: dirOf(name),
        recipe: "selector",
      });
      const c = coordinator("baton-elector");
      let terms = 0;
      let ended: () => void = () => undefined;
      // A resigning leader's term ends, as a release does, when it asks to give it up: its
      // signal aborts only once the store has deleted its node, which may be after the next
      // leader was told so.
      let resignedAt: number | undefined;
      const election = c.elect(name, {
        onElected: ({ term, signal }) => {
          terms++;
          const op = history.invokeAcquire("baton", name);
          op.ok(term);
          signal.addEventListener("abort", () => {
            history.invokeRelease("baton", name, resignedAt).done(true);
            resignedAt = undefined;
            ended();
          });
        },
      });
      try {
        await waitUntil(() => election.isLeader, 30_000, "Baton leads");
        const selected = curator.acquire(30_000);
        await queuedCount(raw, dirOf(name), 2, "Curator's selector waits for Baton's leader");
        expect(await stillPending(selected, 500)).toBe(true);
        const revoked = new Promise<void>((r) => {
          ended = r;
        });
        // resign() gives leadership up and campaigns again: behind Curator's node.
        resignedAt = history.now();
        await election.resign();
        await revoked;
        const leadership = await selected;
        expect(election.isLeader).toBe(false);
        expect((await election.leader())?.term).toBe(leadership.token);
        await curator.release();
        await waitUntil(() => election.isLeader, 30_000, "Baton leads again");
        expect(terms).toBe(2);
        expectCleanHistory(history);
      } finally {
        await election.close();
      }
    });
  });

  describe("Curator's LeaderLatch", { timeout: INTEROP_TEST_MS }, () => {
    const name = "interop-latch";

    it("does not exclude Baton's elect() on one path: each elects its own leader", async () => {
      // LeaderLatch orders only its `-latch-` nodes and Baton only lock nodes: both lead.
      const c = coordinator("baton-latch");
      const election = c.elect(name, { onElected: () => undefined });
      try {
        await waitUntil(() => election.isLeader, 30_000, "Baton leads");
        const leadership = await curatorWorker.acquire(30_000, {
          path: dirOf(name),
          recipe: "latch",
        });
        expect(leadership.node).toMatch(/-latch-\d{10}$/);
        expect(election.isLeader).toBe(true);
        expect((await election.leader())?.ownerId).toBe("baton-latch");
        await curatorWorker.release();
      } finally {
        await election.close();
      }
    });
  });
});
