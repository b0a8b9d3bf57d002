import {
  describeBackend,
  type ServerGroup,
  type StartedServers,
  startServers,
  zookeeperMode,
} from "@baton/conformance/harness";
import { checkHistory, History, RecordedCoordinator } from "@baton/conformance/history";
import { type Coordinator, createCoordinator, type LockLostError } from "@baton/core";
import zookeeper from "node-zookeeper-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ZookeeperBackend } from "../src/index.js";
import { ProxiedClients } from "./support/proxied-clients.js";

async function leaderIndex(group: ServerGroup): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    for (const member of group.members) {
      if (!member.running) continue;
      const [host, port] = member.address.split(":") as [string, string];
      if ((await zookeeperMode(host, Number(port))) === "leader") return member.index;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no ZooKeeper leader found");
}

function nextEvent(
  c: Coordinator,
  event: "renewed",
  after: number,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no ${event} event within ${timeoutMs} ms`));
    }, timeoutMs);
    const off = c.on(event, ({ durationMs }) => {
      // A renewal that started after `after`.
      if (performance.now() - durationMs > after) {
        clearTimeout(timer);
        off();
        resolve();
      }
    });
  });
}

// A private ensemble: these tests kill members, so they never touch the shared one.
describeBackend("zookeeper", () => {
  describe("leader failover (private ensemble)", () => {
    let started: StartedServers;
    let group: ServerGroup;
    const cleanups: (() => Promise<unknown>)[] = [];

    beforeAll(async () => {
      started = await startServers({ backends: ["zookeeper"] });
      group = started.groups.zookeeper as ServerGroup;
    }, 60_000);
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });
    afterAll(async () => {
      await started?.stop();
    });

    const coordinator = (backend: ZookeeperBackend, ttlMs: number): Coordinator => {
      const c = createCoordinator({ backend, ttlMs });
      cleanups.push(async () => {
        await c.close();
        await backend.close();
      });
      return c;
    };

    it("killing the leader keeps a held lock when the client reconnects within the session timeout", async () => {
      const ttl = 8_000;
      let disconnects = 0;
      const a = coordinator(
        ZookeeperBackend.fromUrl(group.url, {
          createClient: (request) => {
            const client = zookeeper.createClient(
              request.hosts.map((h) => `${h.host}:${h.port}`).join(","),
              { sessionTimeout: request.sessionTimeoutMs, spinDelay: 100 },
            );
            client.on("disconnected", () => {
              disconnects++;
            });
            return client;
          },
        }),
        ttl,
      );
      const b = coordinator(ZookeeperBackend.fromUrl(group.url), ttl);
      const history = new History();
      const ra = new RecordedCoordinator(history, "a", a);
      const lost: unknown[] = [];
      a.on("lost", (e) => {
        lost.push(e);
      });
      const lock = await ra.acquire("failover");
      const leader = await leaderIndex(group);
      const killedAt = performance.now();
      await group.kill(leader);
      cleanups.push(() => group.restart(leader));
      // A renewal that started after the kill succeeds: the session lives on the new quorum.
      await nextEvent(a, "renewed", killedAt, ttl);
      expect(disconnects).toBeGreaterThanOrEqual(1); // the client did lose its server
      expect(lock.held).toBe(true);
      expect(lost).toEqual([]);
      expect(await b.holder("failover")).toMatchObject({ ownerId: a.ownerId, token: lock.token });
      expect(await b.tryAcquire("failover")).toBeNull();
      expect(await ra.release(lock)).toBe(true);
      // Renewals through the leader change kept one unbroken hold: no violation.
      expect(checkHistory(history, { fencing: true }).map((v) => v.message)).toEqual([]);
    }, 60_000);

    it("killing the leader while the holder cannot reach the ensemble past the session timeout reports the lock lost", async () => {
      const ttl = 2_000;
      const proxied = new ProxiedClients();
      cleanups.push(() => proxied.close());
      const a = coordinator(
        ZookeeperBackend.fromUrl(group.url, { createClient: proxied.factory }),
        ttl,
      );
      const b = coordinator(ZookeeperBackend.fromUrl(group.url), ttl);
      const history = new History();
      const ra = new RecordedCoordinator(history, "a", a);
      const rb = new RecordedCoordinator(history, "b", b);
      const lock = await ra.acquire("failover-expired");
      const leader = await leaderIndex(group);
      proxied.blackholeAll();
      const cutAt = performance.now();
      await group.kill(leader);
      cleanups.push(() => group.restart(leader));
      const next = await rb.acquire("failover-expired", { waitMs: 30_000 });
      expect(lock.signal.aborted).toBe(true);
      expect(["deadline", "session-lost"]).toContain((lock.signal.reason as LockLostError).reason);
      expect(performance.now() - cutAt).toBeGreaterThan(ttl);
      expect(next.token).toBeGreaterThan(lock.token);
      proxied.forwardAll();
      await rb.release(next);
      const again = await ra.acquire("failover-expired", { waitMs: 30_000 });
      expect(again.token).toBeGreaterThan(next.token);
      await ra.release(again);
      // The cut-off holder stopped trusting its lock before b got it; tokens rose: no violation.
      expect(checkHistory(history, { fencing: true }).map((v) => v.message)).toEqual([]);
    }, 60_000);
  });
});
