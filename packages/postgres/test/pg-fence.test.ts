import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, MemoryBackend, StaleTokenError } from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type PgFence, PostgresBackend, pgFence } from "../src/index.js";

/**
 * The three gaps of the invoice story (`baton demo`), against a real server: the invoice job writes one row per client
 * and month through the fence, `ON CONFLICT DO NOTHING` makes a redo harmless.
 */
describeBackend("postgres", (url) => {
  describe("pgFence (the invoice story)", () => {
    let pool: pg.Pool;
    let backend: PostgresBackend;
    let fence: PgFence;
    const invoices = `invoices_${randomUUID().slice(0, 8)}`;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      pool = new pg.Pool({ connectionString: url, max: 6 });
      pool.on("error", () => undefined);
      backend = new PostgresBackend({ url });
      fence = pgFence(pool);
      await fence.migrate();
      await pool.query(
        `CREATE TABLE ${invoices} (client_id int, month text, amount numeric(12,2), token bigint NOT NULL, PRIMARY KEY (client_id, month))`,
      );
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${invoices}`).catch(() => undefined);
      await backend?.close();
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
      fence.transaction(job, token, async (client) => {
        const r = await client.query(
          `INSERT INTO ${invoices} (client_id, month, amount, token) VALUES ($1, $2, 10, $3)
           ON CONFLICT (client_id, month) DO NOTHING`,
          [clientId, month, token.toString()],
        );
        return r.rowCount;
      });

    const rows = async (month: string) =>
      (
        await pool.query(
          `SELECT client_id, token FROM ${invoices} WHERE month = $1 ORDER BY client_id`,
          [month],
        )
      ).rows.map((r: { client_id: number; token: string }) => [r.client_id, BigInt(r.token)]);

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

    it("gap 2: an ON CONFLICT DO NOTHING redo by the new holder writes no duplicate", async () => {
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
        inserted.push((await saveInvoice(job, secondLock.token, clientId, month)) ?? -1);
      }
      expect(inserted).toEqual([0, 0, 0, 1, 1]);
      expect(await rows(month)).toEqual([
        [1, firstLock.token],
        [2, firstLock.token],
        [3, firstLock.token],
        [4, secondLock.token],
        [5, secondLock.token],
      ]);
      const duplicates = await pool.query(
        `SELECT client_id FROM ${invoices} WHERE month = $1 GROUP BY client_id HAVING count(*) > 1`,
        [month],
      );
      expect(duplicates.rows).toEqual([]);
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
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query(
          `INSERT INTO ${invoices} (client_id, month, amount, token) VALUES (1, $1, 10, 99)`,
          [month],
        );
        const error = await fence.check(client, job, 99n).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StaleTokenError);
        await client.query("ROLLBACK");
      } finally {
        client.release();
      }
      expect(await rows(month)).toEqual([]);

      // A write that fails after the fence accepted a newer token rolls the raise back too
      // (a fence that raises on writes: raiseOnWrite).
      const boom = new Error("write failed");
      const raising = pgFence(pool, { raiseOnWrite: true });
      await expect(
        raising.transaction(job, 101n, async (c) => {
          await c.query(
            `INSERT INTO ${invoices} (client_id, month, amount, token) VALUES (2, $1, 10, 101)`,
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

    it("serves as the fence of correctness mode for another backend (memory)", async () => {
      const job = `invoices-${randomUUID()}`;
      const memory = new MemoryBackend();
      const a = createCoordinator({ backend: memory, ttlMs: 5_000, mode: "correctness", fence });
      coordinators.push(a);
      const lock = await a.acquire(job);
      expect(await fence.highest(job)).toBe(lock.token);
      await lock.release();
    });
  });
});
