import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import { createCoordinator } from "@baton/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisBackend } from "../src/index.js";

/** A lock held with a 10 s TTL: holder() tells the time left on it, from the store. */
async function checkRemaining(url: string): Promise<void> {
  const coordinator = createCoordinator({ url: `${url}?prefix=holder:`, ttlMs: 10_000 });
  const observer = createCoordinator({ url: `${url}?prefix=holder:`, ttlMs: 10_000 });
  try {
    const name = `remaining-${Date.now()}`;
    expect(await observer.holder(name)).toBeNull();
    const lock = await coordinator.acquire(name, { value: "v" });
    const holder = await observer.holder(name);
    expect(holder?.ownerId).toBe(coordinator.ownerId);
    // Redlock's grants carry no token: its holders report 0n.
    expect(holder?.token).toBe(url.startsWith("redlock:") ? 0n : lock.token);
    expect(holder?.value).toBe("v");
    expect(holder?.remainingMs).toBeGreaterThan(0);
    expect(holder?.remainingMs).toBeLessThanOrEqual(10_000);
    // The session renews the lease: a read later still finds time left on it.
    await new Promise((r) => setTimeout(r, 500));
    expect((await observer.holder(name))?.remainingMs).toBeGreaterThan(0);
    await lock.release();
    expect(await observer.holder(name)).toBeNull();
  } finally {
    await Promise.all([coordinator.close(), observer.close()]);
  }
}

describeBackend("redis", (url) => {
  describe("holder() tells the time left on the lease", () => {
    it("one node", () => checkRemaining(url));

    describe("a Redis Cluster", () => {
      let cluster: ServerGroup | undefined;
      let dir: string | undefined;
      beforeAll(async () => {
        dir = await mkdtemp(join(tmpdir(), "baton-redis-holder-"));
        cluster = await startRedisCluster({ dir });
      });
      afterAll(async () => {
        await cluster?.stop();
        if (dir !== undefined) await rm(dir, { recursive: true, force: true });
      });

      it("every lock, whichever node holds its slot", async () => {
        const clusterUrl = cluster?.url as string;
        await checkRemaining(clusterUrl);
        const backend = new RedisBackend({ url: clusterUrl });
        const coordinator = createCoordinator({ backend, ttlMs: 10_000 });
        try {
          // Names spread over the slots of all three masters.
          const names = Array.from({ length: 12 }, (_, i) => `spread-${i}-${Date.now()}`);
          const locks = await Promise.all(names.map((n) => coordinator.acquire(n)));
          for (const name of names) {
            const remaining = (await coordinator.holder(name))?.remainingMs;
            expect(remaining).toBeGreaterThan(0);
            expect(remaining).toBeLessThanOrEqual(10_000);
          }
          await Promise.all(locks.map((l) => l.release()));
        } finally {
          await coordinator.close();
        }
      });
    });
  });
});

describeBackend("redlock", (url) => {
  it("holder() tells the time left while a quorum of nodes keeps the lock", () =>
    checkRemaining(url));
});
