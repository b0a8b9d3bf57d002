import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import {
  certainHolds,
  checkHistory,
  History,
  RecordedCoordinator,
} from "@baton/conformance/history";
import { createCoordinator, LockLostError } from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { lockKeys, RedisBackend } from "../src/index.js";

function hostPort(url: string): { host: string; port: number } {
  const m = /^redis:\/\/([^:/]+):(\d+)/.exec(url);
  if (m === null) throw new Error(`unexpected url ${url}`);
  return { host: m[1] as string, port: Number(m[2]) };
}

const abortedAt = (signal: AbortSignal) =>
  new Promise<number>((resolve) =>
    signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
  );

describeBackend("redis", (url) => {
  describe("redis holder cut off from the server", () => {
    const cleanups: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });

    it.each(["blackhole", "cut"] as const)(
      "%s: the holder's signal aborts no later than its local deadline, before the key expires on the server",
      async (fault) => {
        const target = hostPort(url);
        const proxy = await TcpProxy.start(target);
        cleanups.push(() => proxy.close());
        const raw = new Redis(target.port, target.host);
        cleanups.push(async () => raw.disconnect());
        const holder = createCoordinator({
          url: `redis://127.0.0.1:${proxy.port}?prefix=cut:`,
          ttlMs: 1_500,
          ownerId: "cut-off",
        });
        cleanups.push(() => holder.close());
        const other = createCoordinator({ url: `${url}?prefix=cut:`, ttlMs: 1_500 });
        cleanups.push(() => other.close());

        const name = `cut-${fault}-${Date.now()}`;
        const lock = await holder.acquire(name);
        await new Promise((r) => setTimeout(r, 700)); // a renewal or two through the proxy
        expect(lock.held).toBe(true);
        proxy[fault]();
        const deadline = performance.now() + lock.remainingMs();
        const lost = abortedAt(lock.signal);
        // When does the key expire on the server? A lower bound, from its PTTL.
        let expiresNoEarlierThan = 0;
        for (let i = 0; i < 3; i++) {
          const sent = performance.now();
          const pttl = await raw.pttl(lockKeys("cut:", name).lock);
          expiresNoEarlierThan = Math.max(expiresNoEarlierThan, sent + pttl - 1);
        }
        const next = other.acquire(name, { waitMs: 20_000 }).then(() => performance.now());
        const lostAt = await lost;
        expect(lock.signal.reason).toBeInstanceOf(LockLostError);
        expect((lock.signal.reason as LockLostError).reason).toBe("deadline");
        // Timers fire a little late on a busy machine.
        expect(lostAt).toBeLessThanOrEqual(deadline + 150);
        // The local deadline comes before the server can hand the lock to anyone else.
        expect(deadline).toBeLessThanOrEqual(expiresNoEarlierThan);
        expect(await next).toBeGreaterThan(lostAt);
      },
    );

    it("while the server is unreachable, tries, waits and releases settle within their bounds", async () => {
      const target = hostPort(url);
      const proxy = await TcpProxy.start(target);
      cleanups.push(() => proxy.close());
      const c = createCoordinator({
        url: `redis://127.0.0.1:${proxy.port}?prefix=cut:&commandTimeoutMs=500`,
        ttlMs: 1_500,
      });
      cleanups.push(() => c.close());
      const name = `unreachable-${Date.now()}`;
      const lock = await c.acquire(name);
      proxy.blackhole();
      const bounded = async (what: Promise<unknown>, boundMs: number) => {
        const started = performance.now();
        const outcome = await what.then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
        expect(performance.now() - started).toBeLessThan(boundMs);
        return outcome;
      };
      const released = await bounded(lock.release(), 1_500 + 1_000);
      // Either the release timed out (named error) or the deadline passed first (no I/O).
      if ("error" in released)
        expect((released.error as Error).name).toBe("BackendUnavailableError");
      else expect(released.value).toBe(false);
      const other = `unreachable-other-${Date.now()}`;
      const tried = await bounded(c.tryAcquire(other), 1_500 + 1_000);
      expect("error" in tried && (tried.error as Error).name).toBe("BackendUnavailableError");
      const waited = await bounded(c.acquire(other, { waitMs: 1_000 }), 1_000 + 1_000);
      expect("error" in waited && (waited.error as Error).name).toMatch(
        /BackendUnavailableError|LockTimeoutError/,
      );
    });
  });
});

describeBackend("redis", () => {
  describe("redis restart (private server)", () => {
    let started: StartedServers;
    let url: string;
    beforeAll(async () => {
      started = await startServers({ backends: ["redis"] });
      url = started.servers.redis as string;
    });
    afterAll(async () => {
      await started?.stop();
    });

    it("a restart without persistence loses the keys: held locks abort, waiters get the lock, tokens keep rising", async () => {
      const holder = createCoordinator({ backend: new RedisBackend({ url }), ttlMs: 1_000 });
      const waiter = createCoordinator({ backend: new RedisBackend({ url }), ttlMs: 1_000 });
      const history = new History();
      const h = new RecordedCoordinator(history, "holder", holder);
      const w = new RecordedCoordinator(history, "waiter", waiter);
      try {
        const name = "restart";
        const before: bigint[] = [];
        for (let i = 0; i < 3; i++) {
          const l = await h.acquire(name);
          before.push(l.token);
          await h.release(l);
        }
        const lock = await h.acquire(name);
        const waiting = w.acquire(name, { waitMs: 15_000 });
        await new Promise((r) => setTimeout(r, 200));
        // Listen before the restart: a renewal can find the key gone, or the deadline can
        // pass, while the restarted server is still being probed for readiness.
        const aborted = new Promise<LockLostError>((resolve) =>
          lock.signal.addEventListener("abort", () => resolve(lock.signal.reason), {
            once: true,
          }),
        );
        await started.groups.redis?.restart(0);
        const lost = await aborted;
        // The key is gone (key-lost), or the renewal could not reach the server in time.
        expect(["key-lost", "deadline"]).toContain(lost.reason);
        const next = await waiting;
        // The counter went with the data; the new one starts from the server's clock.
        for (const earlier of [...before, lock.token]) expect(next.token).toBeGreaterThan(earlier);
        await w.release(next);
        const after = await h.acquire(name);
        expect(after.token).toBeGreaterThan(next.token);
        await h.release(after);
        // Tokens rose in grant order through the restart; what "single-node" still admits is
        // two holders at once until the old one's next renewal finds its key gone: any
        // violation is that overlap, shorter than half a TTL (renewals run every third).
        for (const v of checkHistory(history, { fencing: true })) expect(v.kind).toBe("overlap");
        const holds = certainHolds(history.entries);
        const old = holds.find((x) => x.process === "holder" && x.token === lock.token);
        const taken = holds.find((x) => x.process === "waiter");
        expect(["lost", "deadline"]).toContain(old?.endedBy);
        expect((old?.end ?? 0) - (taken?.start ?? 0)).toBeLessThan(500);
      } finally {
        await holder.close();
        await waiter.close();
      }
    });

    it("after FLUSHALL the next token is greater than every earlier one", async () => {
      const a = createCoordinator({ backend: new RedisBackend({ url }), ttlMs: 2_000 });
      const raw = new Redis(url);
      try {
        const name = "flushed";
        const earlier: bigint[] = [];
        for (let i = 0; i < 5; i++) {
          const lock = await a.acquire(name);
          earlier.push(lock.token);
          await lock.release();
        }
        await raw.flushall();
        const lock = await a.acquire(name);
        for (const t of earlier) expect(lock.token).toBeGreaterThan(t);
        await lock.release();
        const again = await a.acquire(name);
        expect(again.token).toBe(lock.token + 1n);
        await again.release();
      } finally {
        raw.disconnect();
        await a.close();
      }
    });

    it("a release that hands the lock to a waiter after the counter was lost gives a greater token", async () => {
      const backend = new RedisBackend({ url });
      const a = createCoordinator({ backend, ttlMs: 2_000 });
      const b = createCoordinator({ backend: new RedisBackend({ url }), ttlMs: 2_000 });
      const raw = new Redis(url);
      try {
        const name = "handoff-lost-counter";
        const first = await a.acquire(name);
        const waiting = b.acquire(name, { waitMs: 10_000 });
        const keys = lockKeys(backend.keyPrefix, name);
        // Wait until b stands in the line, then lose the counter (as eviction would).
        for (let i = 0; i < 200 && (await raw.zcard(keys.waiters)) === 0; i++) {
          await new Promise((r) => setTimeout(r, 10));
        }
        expect(await raw.del(keys.token)).toBe(1);
        await first.release();
        const next = await waiting;
        expect(next.token).toBeGreaterThan(first.token);
        await next.release();
      } finally {
        raw.disconnect();
        await a.close();
        await b.close();
      }
    });
  });
});
