import { randomUUID } from "node:crypto";
import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock, LockLostError } from "@baton/core";
import mysqlPromise from "mysql2/promise";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MysqlBackend, migrate } from "../src/index.js";

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

/** mysql2 settings of a `mysql://` or `mariadb://` URL (user, password, host, port, database). */
function settings(url: string): mysqlPromise.ConnectionOptions {
  const at = new URL(url.replace(/^(mysql|mariadb):/, "http:"));
  return {
    host: at.hostname,
    port: Number(at.port),
    user: decodeURIComponent(at.username),
    password: decodeURIComponent(at.password),
    database: at.pathname.slice(1),
  };
}

describeBackend("mysql-lease", () => {
  // A server of their own: these tests kill every connection, or stop the server.
  describe("MariaDB faults (private server)", () => {
    let servers: StartedServers;
    let backend: MysqlBackend;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      servers = await startServers({ backends: ["mysql-lease"] });
      backend = new MysqlBackend({ url: servers.servers["mysql-lease"] as string });
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await backend?.close();
      await servers?.stop();
    });

    const holders = (ttlMs: number) =>
      [0, 1, 2].map(() => {
        const c = createCoordinator({ backend, closeBackend: false, ttlMs });
        coordinators.push(c);
        return c;
      });

    it("KILL of every pooled connection: the holder keeps its lock, renews on new connections, and another owner is still refused", async () => {
      const ttlMs = 2_000;
      const name = `killed-${randomUUID()}`;
      const url = servers.servers["mysql-lease"] as string;
      const admin = await mysqlPromise.createConnection(settings(url));
      const holder = createCoordinator({ url, ttlMs });
      const other = createCoordinator({ url, ttlMs });
      coordinators.push(holder, other);
      const lock = await holder.acquire(name);
      expect(await other.tryAcquire(name)).toBeNull();
      for (let round = 0; round < 3; round++) {
        const [rows] = await admin.query(
          "SELECT id FROM information_schema.processlist WHERE user = ? AND id <> CONNECTION_ID()",
          [settings(url).user],
        );
        const ids = (rows as { id: number | string }[]).map((row) => Number(row.id));
        expect(ids.length).toBeGreaterThan(0);
        for (const id of ids) await admin.query(`KILL ${id}`).catch(() => undefined);
        await delay(ttlMs / 2);
      }
      // Three rounds of kills spanning more than a TTL: still held, on the server too.
      await delay(ttlMs);
      expect(lock.held).toBe(true);
      expect(lock.signal.aborted).toBe(false);
      expect(await other.tryAcquire(name)).toBeNull();
      expect((await other.holder(name))?.token).toBe(lock.token);
      await lock.release();
      const next = await other.acquire(name, { waitMs: 5_000 });
      expect(next.token).toBeGreaterThan(lock.token);
      await next.release();
      await admin.end();
    }, 30_000);

    it("a restart shorter than the TTL: every lease survives it (the rows are durable), and tokens still rise", async () => {
      const group = servers.groups["mysql-lease"];
      if (group === undefined) throw new Error("no private mariadb group");
      // Long enough for a restart on a busy machine (about 0.6 s on an idle one).
      const ttlMs = 8_000;
      const run = randomUUID().slice(0, 8);
      const cs = holders(ttlMs);
      const locks: Lock[] = [];
      for (const [i, c] of cs.entries()) locks.push(await c.acquire(`restart-${run}-${i}`));
      const started = Date.now();
      await group.restart(0);
      const restartMs = Date.now() - started;
      // Renewals resume on new connections; give them two intervals.
      await delay((2 * ttlMs) / 3);
      for (const lock of locks) expect(lock.held, `restart took ${restartMs} ms`).toBe(true);
      const other = createCoordinator({ backend, closeBackend: false, ttlMs });
      coordinators.push(other);
      for (const [i, lock] of locks.entries()) {
        expect(await other.tryAcquire(`restart-${run}-${i}`)).toBeNull();
        await lock.release();
        const next = await other.acquire(`restart-${run}-${i}`, { waitMs: 10_000 });
        expect(next.token).toBeGreaterThan(lock.token);
        await next.release();
      }
    }, 60_000);

    it("the server down longer than the TTL: every holder's signal aborts, and once it is back tokens rise", async () => {
      const group = servers.groups["mysql-lease"];
      if (group === undefined) throw new Error("no private mariadb group");
      const ttlMs = 2_000;
      const run = randomUUID().slice(0, 8);
      const cs = holders(ttlMs);
      const locks: Lock[] = [];
      for (const [i, c] of cs.entries()) locks.push(await c.acquire(`down-${run}-${i}`));
      let before = 0n;
      for (const lock of locks) if (lock.token > before) before = lock.token;
      await group.stopMember(0);
      const reasons = await Promise.all(locks.map((lock) => aborted(lock.signal, 10_000)));
      for (const reason of reasons) {
        expect(reason).toBeInstanceOf(LockLostError);
        expect(["session-lost", "deadline"]).toContain((reason as LockLostError).reason);
      }
      await group.restart(0);
      for (const [i, c] of cs.entries()) {
        const lock = await c.acquire(`down-${run}-${i}`, { waitMs: 20_000 });
        expect(lock.token).toBeGreaterThan(before);
        await lock.release();
      }
    }, 60_000);
  });
});

describeBackend("mysql-lease", (url) => {
  it("opening a session deletes the rows of sessions that expired long ago, and their leases count as free", async () => {
    const admin = await mysqlPromise.createConnection(settings(url));
    const coordinators: Coordinator[] = [];
    try {
      const name = `dead-${randomUUID()}`;
      const dead = `dead-${randomUUID()}`;
      await migrate(admin);
      // What a process that died holding a lock an hour ago leaves behind.
      await admin.query(
        `INSERT INTO baton_lease_sessions (id, owner, ttl_ms, expires_at)
          VALUES (?, 'gone', 1000, UTC_TIMESTAMP(3) - INTERVAL 1 HOUR)`,
        [dead],
      );
      await admin.query(
        `INSERT INTO baton_leases (namespace, name, session, owner, token, value, granted_at)
          VALUES ('baton', ?, ?, 'gone', 1, NULL, UTC_TIMESTAMP(3) - INTERVAL 1 HOUR)`,
        [name, dead],
      );
      const c = createCoordinator({ url, ttlMs: 2_000 });
      coordinators.push(c);
      expect(await c.holder(name)).toBeNull();
      const [rows] = await admin.query(
        "SELECT COUNT(*) AS n FROM baton_lease_sessions WHERE id = ?",
        [dead],
      );
      expect(Number((rows as { n: number | string }[])[0]?.n)).toBe(0);
      const lock = await c.acquire(name);
      expect(lock.token).toBeGreaterThan(1n);
      await lock.release();
    } finally {
      await Promise.allSettled(coordinators.map((c) => c.close()));
      await admin.end();
    }
  });
});
