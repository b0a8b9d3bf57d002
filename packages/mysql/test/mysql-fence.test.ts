import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  BackendUnavailableError,
  type Coordinator,
  createCoordinator,
  MemoryBackend,
  StaleTokenError,
} from "@baton/core";
import mysql from "mysql2/promise";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type MysqlFence, mysqlFence } from "../src/mysql-fence.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The three gaps of the invoice story, against a real server: the invoice job writes one row
 * per client and month through the fence, and INSERT IGNORE makes a redo harmless.
 */
describeBackend("mysql", (url) => {
  describe("mysqlFence (the invoice story)", () => {
    let pool: mysql.Pool;
    let fence: MysqlFence;
    const invoices = `invoices_${randomUUID().slice(0, 8)}`;
    const coordinators: Coordinator[] = [];
    const backend = new MemoryBackend();

    beforeAll(async () => {
      pool = mysql.createPool({ uri: url, connectionLimit: 6 });
      fence = mysqlFence(pool);
      await fence.migrate();
      await pool.query(
        `CREATE TABLE ${invoices} (client_id INT, month VARCHAR(7), amount DECIMAL(12,2), token BIGINT NOT NULL, PRIMARY KEY (client_id, month))`,
      );
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${invoices}`).catch(() => undefined);
      await pool?.end();
    });

    const coordinator = (mode: "efficiency" | "correctness") => {
      const c = createCoordinator({
        backend,
        closeBackend: false,
        ttlMs: 5_000,
        mode,
        ...(mode === "correctness" ? { fence } : {}),
      });
      coordinators.push(c);
      return c;
    };

    /** The invoice job's save_invoice: fence check and insert in one transaction, redo-safe. */
    const saveInvoice = (job: string, token: bigint, clientId: number, month: string) =>
      fence.transaction(job, token, async (connection: mysql.PoolConnection) => {
        const [result] = await connection.query<mysql.ResultSetHeader>(
          `INSERT IGNORE INTO ${invoices} (client_id, month, amount, token) VALUES (?, ?, 10, ?)`,
          [clientId, month, token.toString()],
        );
        return result.affectedRows;
      });

    const rows = async (month: string) => {
      const [found] = await pool.query<mysql.RowDataPacket[]>(
        `SELECT client_id, CAST(token AS CHAR) AS token FROM ${invoices} WHERE month = ? ORDER BY client_id`,
        [month],
      );
      return found.map((r) => [r.client_id as number, BigInt(r.token as string)]);
    };

    it("gap 1: a stale write before the new holder's first write is rejected once the new holder raises the fence at acquisition", async () => {
      const job = `invoices-${randomUUID()}`;
      const old = coordinator("correctness");
      const oldLock = await old.acquire(job);
      const oldToken = oldLock.token;
      expect(await saveInvoice(job, oldToken, 1, "2026-10")).toBe(1);
      // The old holder stalls; its lock is gone (here: released) and someone else takes over.
      await oldLock.release();

      // Without raising the fence at acquisition, the gap is real: the new holder has not
      // written yet, so the stale token is still the newest the fence has seen.
      const unraised = coordinator("efficiency");
      const unraisedLock = await unraised.acquire(job);
      expect(unraisedLock.token).toBeGreaterThan(oldToken);
      expect(await saveInvoice(job, oldToken, 2, "2026-10")).toBe(1);
      await unraisedLock.release();

      // Correctness mode raises the fence with the new token before the lock is handed over.
      const next = coordinator("correctness");
      const nextLock = await next.acquire(job);
      expect(await fence.highest(job)).toBe(nextLock.token);
      const stale = await saveInvoice(job, oldToken, 3, "2026-10").catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(StaleTokenError);
      expect((stale as StaleTokenError).highest).toBe(nextLock.token);
      expect((await rows("2026-10")).map(([c]) => c)).toEqual([1, 2]);
      // The new holder's own writes go through with its token.
      expect(await saveInvoice(job, nextLock.token, 3, "2026-10")).toBe(1);
    });

    it("gap 2: an INSERT IGNORE redo by the new holder writes no duplicate", async () => {
      const job = `invoices-${randomUUID()}`;
      const month = "2026-11";
      const first = coordinator("correctness");
      const firstLock = await first.acquire(job);
      for (const clientId of [1, 2, 3]) await saveInvoice(job, firstLock.token, clientId, month);
      await firstLock.release(); // the first run dies after billing three clients

      const second = coordinator("correctness");
      const secondLock = await second.acquire(job);
      const inserted: number[] = [];
      for (const clientId of [1, 2, 3, 4, 5]) {
        inserted.push(await saveInvoice(job, secondLock.token, clientId, month));
      }
      expect(inserted).toEqual([0, 0, 0, 1, 1]);
      expect(await rows(month)).toEqual([
        [1, firstLock.token],
        [2, firstLock.token],
        [3, firstLock.token],
        [4, secondLock.token],
        [5, secondLock.token],
      ]);
      // And the first run, waking up, writes nothing more.
      await expect(saveInvoice(job, firstLock.token, 6, month)).rejects.toBeInstanceOf(
        StaleTokenError,
      );
    });

    it("gap 3: the fence check and its write are atomic: a rejected token leaves no row, a failed write no raise", async () => {
      const job = `invoices-${randomUUID()}`;
      const month = "2026-12";
      await fence.raise(job, 100n);

      // transaction(): a stale token never reaches fn.
      let ran = false;
      const stale = await fence
        .transaction(job, 99n, async () => {
          ran = true;
        })
        .catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(StaleTokenError);
      expect(ran).toBe(false);

      // check() in the caller's own transaction, after the write: the rollback takes the row.
      const connection = await pool.getConnection();
      try {
        await connection.query("START TRANSACTION");
        await connection.query(
          `INSERT INTO ${invoices} (client_id, month, amount, token) VALUES (1, ?, 10, 99)`,
          [month],
        );
        const error = await fence.check(connection, job, 99n).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StaleTokenError);
        await connection.query("ROLLBACK");
      } finally {
        connection.release();
      }
      expect(await rows(month)).toEqual([]);

      // A write that fails after the fence accepted a newer token rolls the raise back too
      // (a fence that raises on writes: raiseOnWrite).
      const boom = new Error("write failed");
      const raising = mysqlFence(pool, { raiseOnWrite: true });
      await expect(
        raising.transaction(job, 101n, async (c: mysql.PoolConnection) => {
          await c.query(
            `INSERT INTO ${invoices} (client_id, month, amount, token) VALUES (2, ?, 10, 101)`,
            [month],
          );
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await fence.highest(job)).toBe(100n);
      expect(await rows(month)).toEqual([]);
      // The same token as the newest is accepted again (one holder, many writes).
      await fence.raise(job, 100n);
      expect(await saveInvoice(job, 100n, 3, month)).toBe(1);
    });

    it("a raise keeps every 64-bit token exact, and names differing only in case are two fences", async () => {
      const job = `Invoices-${randomUUID()}`;
      const big = 2n ** 62n + 1n;
      await fence.raise(job, big);
      const stale = await fence.raise(job, big - 1n).catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(StaleTokenError);
      expect((stale as StaleTokenError).highest).toBe(big);
      await fence.raise(job.toLowerCase(), 1n);
      expect(await fence.highest(job)).toBe(big);
      expect(await fence.highest(job.toLowerCase())).toBe(1n);
    });

    it("serves as the fence of correctness mode for another backend (memory)", async () => {
      const job = `invoices-${randomUUID()}`;
      const memory = new MemoryBackend();
      const a = createCoordinator({ backend: memory, ttlMs: 5_000, mode: "correctness", fence });
      coordinators.push(a);
      const lock = await a.acquire(job);
      expect(await fence.highest(job)).toBe(lock.token);
      await lock.release();
    });

    it("puts the connection's own timeouts back after a fenced transaction", async () => {
      const single = mysql.createPool({ uri: url, connectionLimit: 1 });
      try {
        await single.query("SET SESSION wait_timeout = 777, SESSION innodb_lock_wait_timeout = 33");
        const own = mysqlFence(single, { timeoutMs: 2_500 });
        const job = `settings-${randomUUID()}`;
        await own.raise(job, 1n);
        const inside = await own.transaction(job, 1n, async (c: mysql.PoolConnection) => {
          const [r] = await c.query<mysql.RowDataPacket[]>(
            "SELECT @@SESSION.wait_timeout AS idle, @@SESSION.innodb_lock_wait_timeout AS wait",
          );
          return r[0];
        });
        expect(inside).toEqual({ idle: 3, wait: 3 });
        const [after] = await single.query<mysql.RowDataPacket[]>(
          "SELECT @@SESSION.wait_timeout AS idle, @@SESSION.innodb_lock_wait_timeout AS wait",
        );
        expect(after[0]).toEqual({ idle: 777, wait: 33 });
      } finally {
        await single.end();
      }
    });

    it("opens a pool of its own from a mysql:// or mariadb:// URL, ended by close()", async () => {
      for (const scheme of ["mysql", "mariadb"]) {
        const own = mysqlFence(url.replace(/^[a-z]+:/, `${scheme}:`));
        const job = `url-${randomUUID()}`;
        await own.raise(job, 3n);
        expect(await own.highest(job)).toBe(3n);
        expect(await fence.highest(job)).toBe(3n);
        await own.close();
        await own.close(); // idempotent
      }
    });
  });

  describe("mysqlFence: a holder paused inside a fenced transaction", () => {
    let pool: mysql.Pool;
    const bills = `bills_${randomUUID().slice(0, 8)}`;

    beforeAll(async () => {
      pool = mysql.createPool({ uri: url, connectionLimit: 6 });
      await mysqlFence(pool).migrate();
      await pool.query(`CREATE TABLE ${bills} (client_id INT, token BIGINT NOT NULL)`);
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${bills}`).catch(() => undefined);
      await pool?.end();
    });

    const bill = (c: mysql.PoolConnection, clientId: number, token: bigint) =>
      c.query(`INSERT INTO ${bills} (client_id, token) VALUES (?, ?)`, [clientId, `${token}`]);

    it("the next holder's raise gets the row within about timeoutMs, and the paused holder commits nothing", async () => {
      const name = `paused-${randomUUID()}`;
      const fence = mysqlFence(pool, { timeoutMs: 1_000 });
      await fence.raise(name, 1n);
      let inside: () => void = () => undefined;
      const entered = new Promise<void>((resolve) => {
        inside = resolve;
      });
      // The holder bills one client, then stops answering (a pause) with the row locked.
      const paused = fence
        .transaction(name, 1n, async (c: mysql.PoolConnection) => {
          await bill(c, 1, 1n);
          inside();
          await delay(4_000);
          await bill(c, 2, 1n);
        })
        .catch((e: unknown) => e);
      await entered;

      // The server ends the idle transaction after its wait_timeout (1 s); the next holder's
      // raise waits for the row at most its own timeout, and gets it.
      const next = mysqlFence(pool, { timeoutMs: 5_000 });
      const started = performance.now();
      await next.raise(name, 2n);
      expect(performance.now() - started).toBeLessThan(30_000);
      const outcome = await paused;
      expect(outcome).toBeInstanceOf(BackendUnavailableError);
      expect((outcome as Error).message).toContain("nothing of it was committed");
      // Nothing of the paused holder's transaction landed, not even the bill before the pause.
      const [rows] = await pool.query<mysql.RowDataPacket[]>(`SELECT client_id FROM ${bills}`);
      expect(rows).toEqual([]);
      expect(await next.highest(name)).toBe(2n);
    });

    it("a raise given up on never commits later", async () => {
      const name = `abandoned-${randomUUID()}`;
      const admin = mysqlFence(pool);
      await admin.raise(name, 1n);
      const blocker = await pool.getConnection();
      try {
        await blocker.query("START TRANSACTION");
        await blocker.query("SELECT token FROM baton_fence WHERE resource = ? FOR UPDATE", [name]);
        const gaveUp = new AbortController();
        const raising = mysqlFence(pool, { timeoutMs: 60_000 })
          .raise(name, 5n, { signal: gaveUp.signal })
          .catch((e: unknown) => e);
        await delay(300);
        const reason = new Error("the coordinator gave up");
        gaveUp.abort(reason);
        expect(await raising).toBe(reason);
      } finally {
        await blocker.query("COMMIT").catch(() => undefined);
        blocker.release();
      }
      await delay(500); // time for a raise still queued behind the row lock to commit
      expect(await admin.highest(name)).toBe(1n);
    });

    it("a row locked past timeoutMs by a transaction without limits fails the raise with a message saying so", async () => {
      const name = `blocked-${randomUUID()}`;
      const admin = mysqlFence(pool);
      await admin.raise(name, 1n);
      const blocker = await pool.getConnection();
      try {
        await blocker.query("START TRANSACTION");
        await blocker.query("SELECT token FROM baton_fence WHERE resource = ? FOR UPDATE", [name]);
        const error = await mysqlFence(pool, { timeoutMs: 1_000 })
          .raise(name, 2n)
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain("waited 1 s for a row lock");
      } finally {
        await blocker.query("COMMIT").catch(() => undefined);
        blocker.release();
      }
      expect(await admin.highest(name)).toBe(1n);
    });
  });
});
