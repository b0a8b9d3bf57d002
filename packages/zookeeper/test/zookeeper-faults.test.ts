import { randomUUID } from "node:crypto";
import { type LockWorker, spawnLockWorker } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import {
  type Coordinator,
  createCoordinator,
  type Grant,
  type LockLostError,
  MemoryFence,
  SessionLostError,
} from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZookeeperBackend, type ZookeeperSession } from "../src/index.js";
import { childrenOf, inspector, removeTree, waitUntil } from "./support/counting-clients.js";
import { ProxiedClients } from "./support/proxied-clients.js";

const TTL = 2_000;
const never = new AbortController().signal;

function abortedAt(signal: AbortSignal): Promise<number> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(performance.now());
    else signal.addEventListener("abort", () => resolve(performance.now()), { once: true });
  });
}

describeBackend("zookeeper", (url) => {
  const prefix = `f${randomUUID().slice(0, 8)}`;
  let raw: Client;
  const cleanups: (() => Promise<unknown>)[] = [];
  const coordinator = (backend: ZookeeperBackend, ttlMs = TTL): Coordinator => {
    const c = createCoordinator({ backend, ttlMs });
    cleanups.push(async () => {
      await c.close();
      await backend.close();
    });
    return c;
  };

  beforeAll(async () => {
    raw = await inspector(url.slice("zookeeper://".length));
  });
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });
  afterAll(async () => {
    await removeTree(raw, `/${prefix}`).catch(() => undefined);
    raw.close();
  });

  describe("faults", () => {
    it("a holder cut off from the ensemble: signal aborted by its local deadline, before anyone else holds the lock; its next use opens a new session", async () => {
      const proxied = new ProxiedClients();
      cleanups.push(() => proxied.close());
      const a = coordinator(
        ZookeeperBackend.fromUrl(url, { prefix, createClient: proxied.factory }),
      );
      const b = coordinator(ZookeeperBackend.fromUrl(url, { prefix }));
      let opened = 0;
      a.on("sessionOpened", () => {
        opened++;
      });
      const name = "cut-off";
      const lock = await a.acquire(name);
      await new Promise((r) => setTimeout(r, 300));
      const cutAt = performance.now();
      proxied.blackholeAll();
      const aborted = abortedAt(lock.signal);
      const next = b.acquire(name, { waitMs: 20_000 }).then((l) => ({ l, at: performance.now() }));
      const lostAt = await aborted;
      expect((lock.signal.reason as LockLostError).reason).toBe("deadline");
      // The last confirmed renewal started before the cut: the deadline is within one TTL of it
      // (plus timer slack on a busy machine).
      expect(lostAt - cutAt).toBeLessThanOrEqual(TTL + 500);
      const granted = await next;
      expect(granted.at).toBeGreaterThan(lostAt);
      expect(granted.l.token).toBeGreaterThan(lock.token);
      await granted.l.release();
      // Reachable again: the next acquire runs on a new session.
      proxied.forwardAll();
      const again = await a.acquire(name, { waitMs: 20_000 });
      expect(again.token).toBeGreaterThan(granted.l.token);
      expect(opened).toBe(2);
      await again.release();
    });

    it("an expired session aborts the session's lost signal once the client hears of it", async () => {
      const proxied = new ProxiedClients();
      cleanups.push(() => proxied.close());
      const backend = ZookeeperBackend.fromUrl(url, { prefix, createClient: proxied.factory });
      cleanups.push(() => backend.close());
      const name = "expires";
      const s = await backend.openSession({ ttlMs: TTL, ownerId: "expiring" });
      const grant = (await s.acquire(name, { wait: false, signal: never })) as Grant;
      expect(grant).not.toBeNull();
      const dir = `/${prefix}/${encodeLockName(name)}`;
      expect(await childrenOf((s as ZookeeperSession).client as Client, dir)).toHaveLength(1);
      proxied.blackhole(s);
      await waitUntil(
        async () => (await childrenOf(raw, dir)).length === 0,
        TTL * 3 + 5_000,
        "the ensemble expired the silent session",
      );
      expect(s.lost?.aborted).toBe(false); // the client has not heard yet
      proxied.forward(s);
      // Renew as core would (every TTL/3): an unanswered check makes the client reconnect, and
      // the reconnect is where ZooKeeper tells it the session expired.
      await waitUntil(
        async () => {
          await s.keepAlive().catch(() => undefined);
          return s.lost?.aborted === true;
        },
        15_000,
        "the client learns of the expiry",
      );
      expect(s.lost?.reason).toBeInstanceOf(SessionLostError);
      await expect(s.keepAlive()).rejects.toBeInstanceOf(SessionLostError);
      expect(await s.release(grant)).toBe(false);
      await s.close();
    });

    describe("frozen holder (SIGSTOP in a worker process)", () => {
      let worker: LockWorker | undefined;
      afterEach(async () => {
        await worker?.kill();
        worker = undefined;
      });

      it("is replaced within the session timeout plus slack; on SIGCONT it writes nothing more", async () => {
        const name = `${prefix}-frozen`;
        worker = await spawnLockWorker({ url, ttlMs: TTL });
        const acquired = await worker.request(
          { op: "acquire", name },
          (e) => e.event === "acquired",
        );
        const oldToken = BigInt((acquired as { token: string }).token);
        worker.send({ op: "tick", name, everyMs: 20 });
        await worker.waitFor((e) => e.event === "wrote" && e.seq >= 3, 10_000);
        const b = coordinator(ZookeeperBackend.fromUrl(url));
        worker.pause();
        const pausedAt = performance.now();
        const frozenAt = worker.events.length;
        const lock = await b.acquire(name, { waitMs: 30_000 });
        const replacedMs = performance.now() - pausedAt;
        expect(replacedMs).toBeLessThan(TTL + 3_000);
        expect(lock.token).toBeGreaterThan(oldToken);
        const fence = new MemoryFence();
        await fence.raise(name, lock.token);
        worker.resume();
        await worker.waitFor((e) => e.event === "refused", 10_000, frozenAt);
        const afterPause = worker.events.slice(frozenAt);
        expect(afterPause.filter((e) => e.event === "wrote")).toEqual([]);
        const lost = afterPause.find((e) => e.event === "lost") as { reason: string } | undefined;
        expect(["deadline", "session-lost"]).toContain(lost?.reason);
        expect(lock.held).toBe(true);
        await lock.release();
      });
    });
  });
});
