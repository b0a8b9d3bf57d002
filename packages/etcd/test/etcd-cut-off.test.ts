import { proxyHosts } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { BackendUnavailableError, createCoordinator, LockLostError } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import { hostsOf } from "./support/recording-client.js";

describeBackend("etcd", (url) => {
  describe("etcd holder cut off from every member", () => {
    const cleanups: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });

    it.each(["cut", "blackhole"] as const)(
      "%s: the holder's signal aborts no later than its local deadline, before anyone else gets the lock",
      async (fault) => {
        const { proxies, hosts, close } = await proxyHosts(url);
        cleanups.push(close);
        const proxied = new EtcdBackend({ hosts: [...hosts] });
        cleanups.push(() => proxied.close());
        const direct = new EtcdBackend({ hosts: hostsOf(url) });
        cleanups.push(() => direct.close());
        const holder = createCoordinator({ backend: proxied, ttlMs: 2_000, ownerId: "cut-off" });
        cleanups.push(() => holder.close());
        const other = createCoordinator({ backend: direct, ttlMs: 2_000, ownerId: "other" });
        cleanups.push(() => other.close());

        const name = `etcd-cut-off-${fault}-${Date.now()}`;
        const lock = await holder.acquire(name);
        // Let a renewal or two go through the proxies first.
        await new Promise((r) => setTimeout(r, 1_000));
        expect(lock.held).toBe(true);
        for (const p of proxies) p[fault]();
        // A renewal answer already on its way may still land; after this none can.
        await new Promise((r) => setTimeout(r, 50));
        const deadline = performance.now() + lock.remainingMs();
        const abortedAt = new Promise<number>((resolve) =>
          lock.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
        );
        const next = other.acquire(name, { waitMs: 20_000 }).then(() => performance.now());
        // Right after the deadline the lock reads as lost on the spot, whatever the timers do.
        await new Promise((r) => setTimeout(r, Math.max(0, deadline - performance.now()) + 5));
        expect(lock.held).toBe(false);
        const lostAt = await abortedAt;
        // The abort itself comes from a timer: allow for a busy machine's timer lag.
        expect(lostAt).toBeLessThanOrEqual(deadline + 250);
        expect(lock.signal.reason).toBeInstanceOf(LockLostError);
        expect((lock.signal.reason as LockLostError).reason).toBe("deadline");
        // etcd frees the lock only when the lease runs out on the server: after the holder stopped.
        expect(await next).toBeGreaterThan(lostAt);
      },
    );

    it("keepAlive throws BackendUnavailableError, in bounded time, when no member answers", async () => {
      const { proxies, hosts, close } = await proxyHosts(url);
      cleanups.push(close);
      const proxied = new EtcdBackend({ hosts: [...hosts] });
      cleanups.push(() => proxied.close());
      const session = await proxied.openSession({ ttlMs: 3_000, ownerId: "ka" });
      await session.keepAlive();
      for (const p of proxies) p.blackhole();
      const started = performance.now();
      const error = await session.keepAlive().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendUnavailableError);
      // Bounded by a third of the TTL, so core can retry before its deadline.
      expect(performance.now() - started).toBeLessThan(2_500);
      for (const p of proxies) p.forward();
    });
  });
});
