import { randomUUID } from "node:crypto";
import { type LockWorker, spawnLockWorker } from "@baton/conformance/faults";
import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { checkHistory, History, RecordedCoordinator } from "@baton/conformance/history";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  type Lock,
  LockLostError,
  StaleTokenError,
} from "@baton/core";
import mysql from "mysql2/promise";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_NAMESPACE, getLockName, MysqlBackend, mysqlFence } from "../src/index.js";

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

describeBackend("mysql", (url) => {
  describe("mysql named-lock faults", () => {
    let admin: mysql.Pool;
    const coordinators: Coordinator[] = [];
    const workers: LockWorker[] = [];
    const coordinator = (ttlMs: number, extra: Parameters<typeof createCoordinator>[0] = {}) => {
      const c = createCoordinator({ url, ttlMs, ...extra });
      coordinators.push(c);
      return c;
    };
    /** The server connection that holds the named lock of `name`, or null. */
    const holderConnection = async (name: string): Promise<number | null> => {
      const [rows] = await admin.query("SELECT IS_USED_LOCK(?) AS id", [
        getLockName(DEFAULT_NAMESPACE, name),
      ]);
      const id = (rows as { id: number | null }[])[0]?.id;
      return id === null || id === undefined ? null : Number(id);
    };

    beforeAll(() => {
      admin = mysql.createPool({ uri: url, connectionLimit: 3 });
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
      const fence = mysqlFence(admin);
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
      // Not before the frozen holder's connection idled out, and within TTL plus slack.
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
      const ttlMs = 2_000;
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

    it("KILL of the holder's connection aborts its signal and lets a waiter in", async () => {
      const ttlMs = 10_000;
      const name = `kill-${randomUUID()}`;
      const history = new History();
      const a = new RecordedCoordinator(history, "a", coordinator(ttlMs));
      const b = new RecordedCoordinator(history, "b", coordinator(ttlMs));
      const lock = await a.acquire(name);
      const waiting = b.acquire(name, { waitMs: 20_000 });
      await delay(200);
      const id = await holderConnection(name);
      expect(id).not.toBeNull();
      const killedAt = performance.now();
      await admin.query(`KILL ${Number(id)}`);
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
      expect(await b.release(next)).toBe(true);
      expect(checkHistory(history, { fencing: true }).map((v) => v.message)).toEqual([]);
    });

    it("an abandoned wait leaves no statement waiting in the server", async () => {
      const ttlMs = 5_000;
      const name = `abandoned-${randomUUID()}`;
      const holder = coordinator(ttlMs);
      const waiter = coordinator(ttlMs);
      const lock = await holder.acquire(name);
      const key = getLockName(DEFAULT_NAMESPACE, name);
      const waiting = async () => {
        const [rows] = await admin.query(
          "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE CONCAT('%GET_LOCK(', QUOTE(?), '%')",
          [key],
        );
        return Number((rows as { n: number | string }[])[0]?.n);
      };
      const controller = new AbortController();
      const attempt = waiter
        .acquire(name, { waitMs: 60_000, signal: controller.signal })
        .catch((e: unknown) => e);
      let seen = 0;
      for (let i = 0; i < 100 && seen === 0; i++) {
        await delay(20);
        seen = await waiting();
      }
      expect(seen).toBe(1);
      controller.abort(new Error("no longer needed"));
      expect(await attempt).toMatchObject({ message: "no longer needed" });
      let left = seen;
      for (let i = 0; i < 100 && left > 0; i++) {
        await delay(20);
        left = await waiting();
      }
      expect(left).toBe(0);
      expect(lock.held).toBe(true);
      expect(await lock.release()).toBe(true);
    });

    it("a TTL that is not whole seconds is a ConfigError naming ttlMs, before any lock is taken", async () => {
      const c = coordinator(1_500);
      const error = await c.acquire(`ttl-${randomUUID()}`).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("ttlMs");
      expect((error as ConfigError).message).toContain("wait_timeout");
    });

    it("names longer than GET_LOCK takes, or that differ only in case, are distinct locks", async () => {
      const ttlMs = 5_000;
      const a = coordinator(ttlMs);
      const b = coordinator(ttlMs);
      const base = `long-${randomUUID()}-${"x".repeat(80)}`;
      const first = await a.acquire(`${base}-1`);
      const second = await b.tryAcquire(`${base}-2`);
      expect(second).not.toBeNull();
      const lower = await a.acquire(`case-${randomUUID()}`.toLowerCase());
      const upper = await b.tryAcquire(lower.name.toUpperCase());
      expect(upper).not.toBeNull();
      expect(await b.tryAcquire(`${base}-1`)).toBeNull();
      expect(await b.holder(`${base}-1`)).toMatchObject({ ownerId: a.ownerId, token: first.token });
      for (const l of [first, second, lower, upper]) expect(await l?.release()).toBe(true);
    });
  });
});

describeBackend("mysql", () => {
  describe("mysql named-lock restart (private server)", () => {
    let servers: StartedServers;
    let backend: MysqlBackend;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      servers = await startServers({ backends: ["mysql"] });
      backend = new MysqlBackend({ url: servers.servers.mysql as string });
    });
    afterAll(async () => {
      await Promise.allSettled(coordinators.map((c) => c.close()));
      await backend?.close();
      await servers?.stop();
    });

    it("a restart of the server aborts every holder's signal, and tokens still rise afterwards", async () => {
      const group = servers.groups.mysql;
      if (group === undefined) throw new Error("no private mysql group");
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
