import { randomUUID } from "node:crypto";
import { type LockWorker, spawnLockWorker, TcpProxy } from "@baton/conformance/faults";
import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { checkHistory, History, RecordedCoordinator } from "@baton/conformance/history";
import {
  type Coordinator,
  createCoordinator,
  type Lock,
  LockLostError,
  StaleTokenError,
} from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { advisoryKey, PostgresBackend, pgFence } from "../src/index.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves with the reason once `signal` aborts, or rejects after `ms`. */
function aborted(signal: AbortSignal, ms: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(signal.reason);
    const timer = setTimeout(() => reject(new Error(`signal not aborted within ${ms} ms`)), ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve(signal.reason);
      },
      { once: true },
    );
  });
}

describeBackend("postgres", (url) => {
  describe("postgres faults", () => {
    let admin: pg.Pool;
    const coordinators: Coordinator[] = [];
    const workers: LockWorker[] = [];
    const coordinator = (ttlMs: number, extra: Parameters<typeof createCoordinator>[0] = {}) => {
      const c = createCoordinator({ url, ttlMs, ...extra });
      coordinators.push(c);
      return c;
    };

    beforeAll(() => {
      admin = new pg.Pool({ connectionString: url, max: 3 });
      admin.on("error", () => undefined);
    });
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await admin?.end();
    });

    it("a frozen holder (SIGSTOP) is replaced within TTL plus slack, and its fenced write after SIGCONT is rejected", async () => {
      const ttlMs = 2_000;
      const name = `frozen-${randomUUID()}`;
      const fence = pgFence(admin);
      const worker = await spawnLockWorker({ url, ttlMs, ownerId: "frozen-worker" });
      workers.push(worker);
      const acquired = await worker.request({ op: "acquire", name }, (e) => e.event === "acquired");
      const oldToken = BigInt((acquired as { token: string }).token);
      // An efficiency-mode holder raises the fence itself before its first write.
      await fence.raise(name, oldToken);
      await fence.transaction(name, oldToken, () => undefined); // it wrote once while healthy

      worker.pause();
      const frozenAt = performance.now();
      const next = coordinator(ttlMs, { mode: "correctness", fence });
      const lock = await next.acquire(name, { waitMs: ttlMs * 4 + 5_000 });
      const takeoverMs = performance.now() - frozenAt;
      // Not before the frozen holder's lease ran out, and within TTL plus slack.
      expect(takeoverMs).toBeGreaterThan(ttlMs / 3);
      expect(takeoverMs).toBeLessThan(ttlMs + 3_000);
      expect(lock.token).toBeGreaterThan(oldToken);

      const from = worker.events.length;
      worker.resume();
      await worker.waitFor((e) => e.event === "lost", 10_000, from);
      const write = await fence
        .transaction(name, oldToken, () => {
          throw new Error("the stale write must not run");
        })
        .catch((e: unknown) => e);
      expect(write).toBeInstanceOf(StaleTokenError);
      const refused = await worker.request({ op: "write", name }, (e) => e.event !== "lost");
      expect(refused.event).toBe("refused");
      expect(lock.held).toBe(true);
    });

    it("a SIGKILLed holder is replaced at once, long before its TTL", async () => {
      const ttlMs = 15_000;
      const name = `killed-${randomUUID()}`;
      const worker = await spawnLockWorker({ url, ttlMs, ownerId: "killed-worker" });
      workers.push(worker);
      const acquired = await worker.request({ op: "acquire", name }, (e) => e.event === "acquired");
      const waiter = coordinator(ttlMs);
      const waiting = waiter.acquire(name, { waitMs: 30_000 });
      await delay(200);
      const killedAt = performance.now();
      await worker.kill();
      const lock = await waiting;
      // The socket closed, the server freed the lock, the server-side wait woke.
      expect(performance.now() - killedAt).toBeLessThan(2_000);
      expect(lock.token).toBeGreaterThan(BigInt((acquired as { token: string }).token));
    });

    it("a live holder that does no work for 10 x TTL keeps its lock", async () => {
      const ttlMs = 1_500;
      const name = `idle-${randomUUID()}`;
      const holder = coordinator(ttlMs);
      const other = coordinator(ttlMs);
      const lock = await holder.acquire(name);
      for (let i = 0; i < 10; i++) {
        await delay(ttlMs);
        expect(lock.held).toBe(true);
      }
      expect(await other.tryAcquire(name)).toBeNull();
      expect(await other.holder(name)).toMatchObject({
        ownerId: holder.ownerId,
        token: lock.token,
      });
      expect(await lock.release()).toBe(true);
    });

    it("a holder cut off from the server (blackhole) stops trusting its lock before anyone else gets it", async () => {
      const ttlMs = 1_500;
      const name = `partition-${randomUUID()}`;
      const target = new URL(url);
      const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port) });
      try {
        const proxied = url.replace(`:${target.port}/`, `:${proxy.port}/`);
        const holder = coordinator(ttlMs, { url: proxied });
        const waiter = coordinator(ttlMs);
        const lock = await holder.acquire(name);
        let lostAt: number | undefined;
        lock.signal.addEventListener("abort", () => {
          lostAt = performance.now();
        });
        const waiting = waiter.acquire(name, { waitMs: ttlMs * 4 + 5_000 });
        await delay(100);
        const cutAt = performance.now();
        proxy.blackhole();
        const next = await waiting;
        const grantedAt = performance.now();
        // The server ended the silent connection after its TTL and freed the lock; the holder's
        // local deadline (last renewal + TTL - drift) had already aborted its signal.
        expect(lostAt).toBeDefined();
        expect(lostAt as number).toBeLessThan(grantedAt);
        expect(grantedAt - cutAt).toBeLessThan(ttlMs + 3_000);
        expect(next.token).toBeGreaterThan(lock.token);
        expect((lock.signal.reason as LockLostError).reason).toBe("deadline");
      } finally {
        await proxy.close();
      }
    });

    it("pg_terminate_backend of the holder's connection aborts its signal and lets a waiter in", async () => {
      const ttlMs = 10_000;
      const name = `terminate-${randomUUID()}`;
      const history = new History();
      const a = new RecordedCoordinator(history, "a", coordinator(ttlMs));
      const b = new RecordedCoordinator(history, "b", coordinator(ttlMs));
      const lock = await a.acquire(name);
      const waiting = b.acquire(name, { waitMs: 20_000 });
      await delay(200);
      const key = advisoryKey("baton", name);
      // The connection that holds the lock (no holder row: its token is in token locks).
      const { rows } = await admin.query(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
           AND mode = 'ExclusiveLock' AND classid = (($1::bigint >> 32) & 4294967295)::oid
           AND objid = ($1::bigint & 4294967295)::oid`,
        [key.toString()],
      );
      expect(rows).toHaveLength(1);
      const killedAt = performance.now();
      await admin.query("SELECT pg_terminate_backend($1)", [rows[0].pid]);
      const reason = await aborted(lock.signal, 5_000);
      expect(reason).toBeInstanceOf(LockLostError);
      expect((reason as LockLostError).reason).toBe("session-lost");
      const next = await waiting;
      // Far below the 10 s TTL: the server freed the lock when it ended the connection.
      expect(performance.now() - killedAt).toBeLessThan(3_000);
      expect(next.token).toBeGreaterThan(lock.token);
      expect(await b.coordinator.holder(name)).toMatchObject({
        ownerId: b.coordinator.ownerId,
        token: next.token,
      });
      // The holder learned of the loss before the waiter's grant arrived: no overlap.
      expect(await b.release(next)).toBe(true);
      expect(checkHistory(history, { fencing: true }).map((v) => v.message)).toEqual([]);
    });
  });
});

describeBackend("postgres", () => {
  describe("postgres restart (private server)", () => {
    let servers: StartedServers;
    let backend: PostgresBackend;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      servers = await startServers({ backends: ["postgres"] });
      backend = new PostgresBackend({ url: servers.servers.postgres as string });
    });
    afterAll(async () => {
      await Promise.allSettled(coordinators.map((c) => c.close()));
      await backend?.close();
      await servers?.stop();
    });

    it("a restart of PostgreSQL aborts every holder's signal, and tokens still rise afterwards", async () => {
      const group = servers.groups.postgres;
      if (group === undefined) throw new Error("no private postgres group");
      const ttlMs = 3_000;
      const holders = [0, 1, 2].map(() => {
        const c = createCoordinator({ backend, closeBackend: false, ttlMs });
        coordinators.push(c);
        return c;
      });
      const locks: Lock[] = [];
      for (const [i, c] of holders.entries()) locks.push(await c.acquire(`restart-${i}`));
      let before = 0n;
      for (const l of locks) if (l.token > before) before = l.token;

      await group.restart(0);
      const reasons = await Promise.all(locks.map((l) => aborted(l.signal, 10_000)));
      for (const reason of reasons) {
        expect(reason).toBeInstanceOf(LockLostError);
        expect(["session-lost", "deadline"]).toContain((reason as LockLostError).reason);
      }
      const after: bigint[] = [];
      for (const [i, c] of holders.entries()) {
        const lock = await c.acquire(`restart-${i}`, { waitMs: 20_000 });
        after.push(lock.token);
        await lock.release();
      }
      for (const token of after) expect(token).toBeGreaterThan(before);
    });
  });
});
