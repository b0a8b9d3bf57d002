import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type BackendSession, createCoordinator, type Grant, type Holder } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend } from "../src/index.js";
import { childrenOf, inspector, removeTree, waitUntil } from "./support/counting-clients.js";

const never = new AbortController().signal;

/** The names Curator 5.4 and kazoo 2.8 create (before ZooKeeper appends the sequence). */
const LAYOUTS = {
  curatorMutex: () => `_c_${randomUUID()}-lock-`,
  curatorPlain: () => "lock-",
  kazooLock: () => `${randomUUID().replaceAll("-", "")}__lock__`,
  kazooRead: () => `${randomUUID().replaceAll("-", "")}__rlock__`,
  curatorLatch: () => `_c_${randomUUID()}-latch-`,
} as const;

/** Creates a contender as another library would: an EPHEMERAL_SEQUENTIAL child of `dir`. */
function contend(client: Client, dir: string, prefix: string, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    client.mkdirp(dir, (mkdirError) => {
      if (mkdirError) return reject(mkdirError);
      client.create(
        `${dir}/${prefix}`,
        Buffer.from(data),
        zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL,
        (error, path) => (error ? reject(error) : resolve(path)),
      );
    });
  });
}

function remove(client: Client, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    client.remove(path, -1, (error) => (error ? reject(error) : resolve()));
  });
}

/** The czxid of `path`, Baton's fencing token for the node. */
function czxidOf(client: Client, path: string): Promise<bigint> {
  return new Promise((resolve, reject) => {
    client.exists(path, (error, stat) =>
      error || stat === null || stat === undefined
        ? reject(error ?? new Error(`${path} is gone`))
        : resolve((stat.czxid as Buffer).readBigInt64BE(0)),
    );
  });
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeBackend("zookeeper", (url) => {
  const prefix = `f${randomUUID().slice(0, 8)}`;
  let raw: Client;
  let backend: ZookeeperBackend;
  const sessions: BackendSession[] = [];
  const open = async (ownerId: string) => {
    const s = await backend.openSession({ ttlMs: 10_000, ownerId });
    sessions.push(s);
    return s;
  };
  const dirOf = (name: string) => `/${prefix}/${encodeLockName(name)}`;

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
    backend = ZookeeperBackend.fromUrl(url, { prefix });
  });
  afterAll(async () => {
    await Promise.allSettled(sessions.map((s) => s.close()));
    await backend.close();
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw.close();
  });

  describe("Curator and kazoo contenders on the same parent", () => {
    for (const [layout, data, foreign] of [
      ["kazooLock", "worker-7", "kazoo"],
      ["kazooRead", "", "kazoo"],
      ["curatorMutex", "127.0.0.1", "curator"],
      ["curatorPlain", "10.0.0.5", "curator"],
    ] as const) {
      it(`a try refuses while a ${layout} node is first, and holder() names that library`, async () => {
        const name = `first-${layout}`;
        const path = await contend(raw, dirOf(name), LAYOUTS[layout](), data);
        const s = await open(`try-${layout}`);
        expect(await s.acquire(name, { wait: false, signal: never })).toBeNull();
        expect(await s.holder(name)).toEqual({
          ownerId: data,
          token: await czxidOf(raw, path),
          foreign,
        });
        // The try left nothing behind: the foreign node is the only child.
        expect(await childrenOf(raw, dirOf(name))).toEqual([path.slice(path.lastIndexOf("/") + 1)]);
        await remove(raw, path);
        const grant = (await s.acquire(name, { wait: false, signal: never })) as Grant;
        expect(grant).not.toBeNull();
        expect(await s.holder(name)).toEqual({ ownerId: `try-${layout}`, token: grant.token });
        await s.release(grant);
      });
    }

    it("a waiter watches the contender just ahead of it, whatever library made it", async () => {
      const name = "behind-kazoo";
      const a = await open("holder-a");
      const b = await open("waiter-b");
      const first = (await a.acquire(name, { wait: false, signal: never })) as Grant;
      const kazoo = await contend(raw, dirOf(name), LAYOUTS.kazooLock(), "py-worker");
      let granted: Grant | null | undefined;
      const waiting = b.acquire(name, { wait: true, signal: never }).then((g) => {
        granted = g;
        return g;
      });
      await waitUntil(
        async () => (await childrenOf(raw, dirOf(name))).length === 3,
        5_000,
        "the waiter queued behind the kazoo node",
      );
      // Baton's node ahead of a later foreign node keeps the lock.
      expect(await a.holder(name)).toEqual({ ownerId: "holder-a", token: first.token });
      await a.release(first);
      // The kazoo node is next in the queue: it holds now, and the waiter still waits.
      await settle(500);
      expect(granted).toBeUndefined();
      expect(await b.holder(name)).toMatchObject({ ownerId: "py-worker", foreign: "kazoo" });
      await remove(raw, kazoo);
      const grant = (await waiting) as Grant;
      expect(grant.token).toBeGreaterThan(first.token);
      await b.release(grant);
    });

    it("watch() pushes a foreign holder when it takes the lock and when it lets go", async () => {
      const name = "watched";
      const s = await open("watcher");
      const stop = new AbortController();
      const seen: (Holder | null)[] = [];
      const watching = (async () => {
        for await (const holder of s.watch?.(name, stop.signal) ?? []) seen.push(holder);
      })();
      await waitUntil(() => seen.length === 1, 5_000, "the first push");
      const curator = await contend(raw, dirOf(name), LAYOUTS.curatorMutex(), "127.0.0.1");
      await waitUntil(() => seen.length === 2, 5_000, "the Curator holder is pushed");
      await remove(raw, curator);
      await waitUntil(() => seen.length === 3, 5_000, "the release is pushed");
      stop.abort();
      await watching;
      expect(seen).toEqual([
        null,
        { ownerId: "127.0.0.1", token: expect.any(BigInt), foreign: "curator" },
        null,
      ]);
    });

    it("nodes of other recipes do not count: Curator's LeaderLatch nodes and other children", async () => {
      const name = "latch-beside";
      await contend(raw, dirOf(name), LAYOUTS.curatorLatch(), "latch-id-1");
      await contend(raw, dirOf(name), "member-", "");
      const s = await open("beside-latch");
      const grant = (await s.acquire(name, { wait: false, signal: never })) as Grant;
      expect(grant).not.toBeNull();
      expect(await s.holder(name)).toEqual({ ownerId: "beside-latch", token: grant.token });
      await s.release(grant);
    });
  });

  describe("elect() with Curator's LeaderSelector and kazoo's Election on the same path", () => {
    for (const [layout, data, foreign] of [
      ["curatorMutex", "selector-id-1", "curator"],
      ["kazooLock", "elector-1", "kazoo"],
    ] as const) {
      it(`waits while a ${foreign} leader holds, and names it as the leader`, async () => {
        const name = `election-${layout}`;
        const leader = await contend(raw, dirOf(name), LAYOUTS[layout](), data);
        const coordinator = createCoordinator({ backend, closeBackend: false, ttlMs: 10_000 });
        const terms: bigint[] = [];
        const election = coordinator.elect(name, {
          onElected: ({ term }) => {
            terms.push(term);
          },
        });
        try {
          await settle(500);
          expect(election.isLeader).toBe(false);
          expect(terms).toEqual([]);
          expect(await election.leader()).toEqual({
            ownerId: data,
            value: undefined,
            term: await czxidOf(raw, leader),
          });
          await remove(raw, leader);
          await waitUntil(() => election.isLeader, 5_000, "Baton's instance leads");
          expect(terms).toHaveLength(1);
        } finally {
          await election.close();
          await coordinator.close();
        }
      });
    }
  });

  describe("a parent that vanishes when it empties (Curator's container nodes)", () => {
    it("holder() says free, watch() follows the parent's deletion and re-creation, and acquire re-creates it", async () => {
      const name = "container";
      const s = await open("container-user");
      const first = (await s.acquire(name, { wait: false, signal: never })) as Grant;
      const stop = new AbortController();
      const seen: (Holder | null)[] = [];
      const watching = (async () => {
        for await (const holder of s.watch?.(name, stop.signal) ?? []) seen.push(holder);
      })();
      await waitUntil(() => seen.length === 1, 5_000, "the first push");
      await s.release(first);
      await waitUntil(() => seen.length === 2, 5_000, "the release is pushed");
      // What ZooKeeper does to an emptied container parent, about a minute later.
      await removeTree(raw, dirOf(name));
      expect(await s.holder(name)).toBeNull();
      // A Curator client re-creates the parent and takes the lock: the watch sees it.
      const curator = await contend(raw, dirOf(name), LAYOUTS.curatorMutex(), "127.0.0.1");
      await waitUntil(() => seen.length === 3, 5_000, "the Curator holder is pushed");
      await remove(raw, curator);
      await waitUntil(() => seen.length === 4, 5_000, "its release is pushed");
      await removeTree(raw, dirOf(name));
      const second = (await s.acquire(name, { wait: false, signal: never })) as Grant;
      expect(second.token).toBeGreaterThan(first.token);
      await waitUntil(() => seen.length === 5, 5_000, "the new grant is pushed");
      stop.abort();
      await watching;
      expect(seen.map((h) => h?.foreign ?? h?.ownerId ?? null)).toEqual([
        "container-user",
        null,
        "curator",
        null,
        "container-user",
      ]);
      await s.release(second);
    });
  });
});
