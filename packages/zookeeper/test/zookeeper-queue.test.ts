import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession, Grant } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend, type ZookeeperSession } from "../src/index.js";
import {
  CountingClients,
  childrenOf,
  inspector,
  removeTree,
  waitUntil,
} from "./support/counting-clients.js";
import { ProxiedClients } from "./support/proxied-clients.js";

const never = new AbortController().signal;

describeBackend("zookeeper", (url) => {
  const prefix = `q${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const backends: ZookeeperBackend[] = [];
  const backend = (extra: ConstructorParameters<typeof ZookeeperBackend>[0] | object = {}) => {
    const b = ZookeeperBackend.fromUrl(url, { prefix, ...extra });
    backends.push(b);
    return b;
  };
  const dirOf = (name: string) => `/${prefix}/${encodeLockName(name)}`;

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
  });
  afterAll(async () => {
    await Promise.allSettled(backends.map((b) => b.close()));
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw.close();
  });

  describe("queue", () => {
    it("no herd: with 20 queued waiters one release wakes exactly one; cancelled waiters delete their nodes", async () => {
      const counting = new CountingClients();
      const b = backend({ createClient: counting.factory });
      const name = "herd/job";
      const sessions: BackendSession[] = [];
      for (let i = 0; i < 21; i++) {
        sessions.push(await b.openSession({ ttlMs: 10_000, ownerId: `s${i}` }));
      }
      const [holder, ...waiters] = sessions as [BackendSession, ...BackendSession[]];
      const first = (await holder.acquire(name, { wait: false, signal: never })) as Grant;
      expect(first).not.toBeNull();
      const controllers = waiters.map(() => new AbortController());
      const granted: number[] = [];
      const waits = waiters.map((w, i) =>
        w.acquire(name, { wait: true, signal: controllers[i]?.signal as AbortSignal }).then((g) => {
          granted.push(i);
          return g;
        }),
      );
      for (const wait of waits) wait.catch(() => undefined);
      await waitUntil(
        async () => (await childrenOf(raw, dirOf(name))).length === 21,
        10_000,
        "all 20 waiters are queued",
      );
      // Let every waiter set its watch on its predecessor.
      await new Promise((r) => setTimeout(r, 300));
      const watchesBefore = counting.watchNotifications;
      const listingsBefore = counting.childListings;
      expect(await holder.release(first)).toBe(true);
      // The waiters queued concurrently, so any one of them may be next: exactly one wakes.
      const winner = await Promise.race(waits.map((w, i) => w.then((g) => ({ i, g }))));
      expect(winner.g?.token).toBeGreaterThan(first.token);
      await new Promise((r) => setTimeout(r, 500));
      expect(granted).toEqual([winner.i]);
      expect(counting.watchNotifications - watchesBefore).toBe(1);
      expect(counting.childListings - listingsBefore).toBe(1);
      // Cancel the 19 others: each deletes its own node, leaving only the new holder's.
      const reason = new Error("gave up");
      controllers.forEach((c, i) => {
        if (i !== winner.i) c.abort(reason);
      });
      const outcomes = await Promise.allSettled(waits.filter((_, i) => i !== winner.i));
      expect(outcomes.every((o) => o.status === "rejected" && o.reason === reason)).toBe(true);
      await waitUntil(
        async () => (await childrenOf(raw, dirOf(name))).length === 1,
        5_000,
        "cancelled waiters' nodes are gone",
      );
      await Promise.allSettled(sessions.map((s) => s.close()));
    });

    it("tokens keep rising when the lock's parent node is deleted and re-created between grants", async () => {
      const b = backend();
      const name = "recreated";
      const s = await b.openSession({ ttlMs: 10_000, ownerId: "recreate" });
      try {
        const g1 = (await s.acquire(name, { wait: false, signal: never })) as Grant;
        const path1 = (g1.handle as { path: string }).path;
        expect(await s.release(g1)).toBe(true);
        // Through the same session, so the next acquire is ordered after the delete.
        await removeTree((s as ZookeeperSession).client as Client, dirOf(name));
        const g2 = (await s.acquire(name, { wait: false, signal: never })) as Grant;
        const path2 = (g2.handle as { path: string }).path;
        // The sequence suffix restarted with the new parent; the czxid token did not.
        expect(path1.endsWith("0000000000")).toBe(true);
        expect(path2.endsWith("0000000000")).toBe(true);
        expect(g2.token).toBeGreaterThan(g1.token);
        expect(await s.release(g2)).toBe(true);
      } finally {
        await s.close();
      }
    });

    it("a create whose reply is lost on a connection drop leaves no orphan: the retry finds our node", async () => {
      const proxied = new ProxiedClients();
      try {
        const b = backend({ createClient: proxied.factory });
        const name = "lost-reply";
        const s = await b.openSession({ ttlMs: 8_000, ownerId: "lost-reply" });
        const proxies = proxied.proxiesOf(s);
        // Requests and replies each arrive 500 ms late; cut while the create's reply is in flight.
        for (const p of proxies) p.delay(500);
        const acquiring = s.acquire(name, { wait: false, signal: never });
        await waitUntil(
          async () => (await childrenOf(raw, dirOf(name))).length === 1,
          5_000,
          "the create reached the server",
        );
        for (const p of proxies) p.cut();
        await new Promise((r) => setTimeout(r, 200));
        for (const p of proxies) p.forward();
        const grant = (await acquiring) as Grant;
        expect(grant).not.toBeNull();
        const path = (grant.handle as { path: string }).path;
        // The node the first create made is ours; no second node was created.
        expect(path.endsWith("0000000000")).toBe(true);
        // Read through the session itself: its reads are ordered after its own writes.
        const own = (s as ZookeeperSession).client as Client;
        expect(await childrenOf(own, dirOf(name))).toEqual([path.slice(path.lastIndexOf("/") + 1)]);
        expect(await s.holder(name)).toMatchObject({ ownerId: "lost-reply", token: grant.token });
        expect(await s.release(grant)).toBe(true);
        expect(await childrenOf(own, dirOf(name))).toEqual([]);
        await s.close();
      } finally {
        await proxied.close();
      }
    });
  });
});
