import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  MemoryBackend,
  StaleTokenError,
} from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { pgFence } from "../src/index.js";

/** Runs `fn` and returns what it threw or rejected with. */
async function failure(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure");
}

function expectConfig(error: unknown, field: string, text?: string): void {
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).field).toBe(field);
  if (text !== undefined) expect((error as ConfigError).message).toContain(text);
}

describe("pgFence options are checked at construction", () => {
  const pool = new pg.Pool(); // never connects: every check is before any I/O

  it("table and column names must be plain identifiers, each option named", async () => {
    expectConfig(await failure(() => pgFence(pool, { table: "a.b.c" })), "table");
    expectConfig(await failure(() => pgFence(pool, { table: 'x"; DROP' })), "table");
    expectConfig(
      await failure(() => pgFence(pool, { resourceColumn: "job; drop" })),
      "resourceColumn",
    );
    expectConfig(
      await failure(() => pgFence(pool, { tokenColumn: 7 as unknown as string })),
      "tokenColumn",
    );
    expectConfig(
      await failure(() => pgFence(pool, { resourceColumn: "job", tokenColumn: "job" })),
      "tokenColumn",
    );
    expectConfig(await failure(() => pgFence(pool, { timeoutMs: 0 })), "timeoutMs");
    expectConfig(
      await failure(() => pgFence(pool, { raiseOnWrite: "yes" as unknown as boolean })),
      "raiseOnWrite",
    );
    expectConfig(await failure(() => pgFence(pool, { columns: [] } as never)), "options.columns");
  });

  it("a URL instead of a pool is checked too, and names no credential", async () => {
    expectConfig(await failure(() => pgFence("redis://u:secret@h:6379")), "url");
    const error = await failure(() => pgFence("postgres://u:secret@h/db?schema=x"));
    expectConfig(error, "url", "table option");
    expect((error as Error).message).not.toContain("secret");
  });
});

describeBackend("postgres", (url) => {
  describe("pgFence on a table of your own", () => {
    let pool: pg.Pool;
    const suffix = randomUUID().slice(0, 8);
    const tables: string[] = [];
    const coordinators: Coordinator[] = [];
    const table = async (name: string, columns: string) => {
      const full = `${name}_${suffix}_${tables.length}`;
      tables.push(full);
      await pool.query(`CREATE TABLE ${full} (${columns})`);
      return full;
    };

    beforeAll(() => {
      pool = new pg.Pool({ connectionString: url, max: 4 });
      pool.on("error", () => undefined);
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      for (const t of tables) await pool?.query(`DROP TABLE IF EXISTS ${t}`).catch(() => undefined);
      await pool?.end();
    });

    const correctness = (fence: ReturnType<typeof pgFence>) => {
      const c = createCoordinator({
        backend: new MemoryBackend(),
        ttlMs: 5_000,
        mode: "correctness",
        fence,
      });
      coordinators.push(c);
      return c;
    };

    it("guards an existing job_fence(job, last_token) named by the options", async () => {
      const jobFence = await table("job_fence", "job text PRIMARY KEY, last_token bigint NOT NULL");
      const fence = pgFence(pool, {
        table: `public.${jobFence}`,
        resourceColumn: "job",
        tokenColumn: "last_token",
      });
      const c = correctness(fence);
      const old = await c.acquire("nightly-invoices");
      await old.release();
      const lock = await c.acquire("nightly-invoices");
      const rows = await pool.query(`SELECT job, last_token FROM ${jobFence}`);
      expect(rows.rows).toEqual([{ job: "nightly-invoices", last_token: `${lock.token}` }]);
      expect(await fence.highest("nightly-invoices")).toBe(lock.token);
      expect(await fence.transaction("nightly-invoices", lock.token, () => "written")).toBe(
        "written",
      );
      const stale = await failure(() =>
        fence.transaction("nightly-invoices", old.token, () => "written"),
      );
      expect(stale).toBeInstanceOf(StaleTokenError);
    });

    it("a table without the default columns is a ConfigError naming the option at first use, not a raw SQL error", async () => {
      const jobFence = await table("job_fence", "job text PRIMARY KEY, last_token bigint NOT NULL");
      const fence = pgFence(pool, { table: jobFence });
      const error = await failure(() => fence.raise("x", 1n));
      expectConfig(
        error,
        "resourceColumn",
        `has no column "resource" (its columns: job, last_token)`,
      );
      const tokenMissing = pgFence(pool, { table: jobFence, resourceColumn: "job" });
      expectConfig(await failure(() => tokenMissing.migrate()), "tokenColumn", "last_token");
      // In correctness mode the acquire rejects with the same error, and the grant is given back.
      const c = correctness(fence);
      expectConfig(await failure(() => c.acquire("x", { waitMs: 0 })), "resourceColumn");
      expect(await c.holder("x")).toBeNull();
    });

    it("a table that cannot serve as a fence says what to change", async () => {
      const intToken = await table(
        "int_token",
        "job text PRIMARY KEY, last_token integer NOT NULL",
      );
      expectConfig(
        await failure(() =>
          pgFence(pool, {
            table: intToken,
            resourceColumn: "job",
            tokenColumn: "last_token",
          }).migrate(),
        ),
        "tokenColumn",
        "TYPE bigint",
      );
      const notUnique = await table("not_unique", "job text, last_token bigint NOT NULL");
      expectConfig(
        await failure(() =>
          pgFence(pool, {
            table: notUnique,
            resourceColumn: "job",
            tokenColumn: "last_token",
          }).migrate(),
        ),
        "resourceColumn",
        "ADD PRIMARY KEY",
      );
      const intJob = await table("int_job", "job int PRIMARY KEY, last_token bigint NOT NULL");
      expectConfig(
        await failure(() =>
          pgFence(pool, {
            table: intJob,
            resourceColumn: "job",
            tokenColumn: "last_token",
          }).migrate(),
        ),
        "resourceColumn",
        "make it text",
      );
      const extra = await table(
        "extra_col",
        "job varchar(200) PRIMARY KEY, last_token numeric(20) NOT NULL, owner text NOT NULL",
      );
      const withExtra = pgFence(pool, {
        table: extra,
        resourceColumn: "job",
        tokenColumn: "last_token",
      });
      expectConfig(await failure(() => withExtra.migrate()), "table", '"owner"');
      await pool.query(`ALTER TABLE ${extra} ALTER COLUMN owner SET DEFAULT 'baton'`);
      await withExtra.raise("y", 5n); // varchar and numeric columns serve once the default exists
      expect(await withExtra.highest("y")).toBe(5n);
    });
  });

  describe("pgFence refuses writes under a resource the lock did not raise", () => {
    let pool: pg.Pool;
    const bills = `bills_${randomUUID().slice(0, 8)}`;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      pool = new pg.Pool({ connectionString: url, max: 4 });
      pool.on("error", () => undefined);
      await pool.query(`CREATE TABLE ${bills} (client text, token bigint NOT NULL)`);
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${bills}`).catch(() => undefined);
      await pool?.end();
    });

    it("a stale holder billing under a per-client resource is refused, not let through", async () => {
      const fence = pgFence(pool);
      const backend = new MemoryBackend();
      const coordinator = () => {
        const c = createCoordinator({ backend, ttlMs: 5_000, mode: "correctness", fence });
        coordinators.push(c);
        return c;
      };
      const lockName = `billing-${randomUUID()}`;
      const bill = (client: string, token: bigint) =>
        fence.transaction(`${lockName}/${client}`, token, (db) =>
          db.query(`INSERT INTO ${bills} (client, token) VALUES ($1, $2)`, [client, `${token}`]),
        );
      const old = await coordinator().acquire(lockName);
      await old.release(); // the old holder is paused past its lease; someone else takes over
      const next = await coordinator().acquire(lockName);
      expect(next.token).toBeGreaterThan(old.token);

      // Correctness mode raised the fence of the lock's name only. A write under another
      // resource is refused with a ConfigError saying so, for the stale holder and the new one.
      for (const client of ["acme", "globex", "initech"]) {
        const error = await failure(() => bill(client, old.token));
        expectConfig(error, "resource", "was never raised");
        expect((error as Error).message).toContain("lock's name");
      }
      expectConfig(await failure(() => bill("acme", next.token)), "resource");
      expect((await pool.query(`SELECT * FROM ${bills}`)).rows).toEqual([]);

      // Under the lock's name, the new holder writes and the stale one is rejected.
      const write = (token: bigint) =>
        fence.transaction(lockName, token, (db) =>
          db.query(`INSERT INTO ${bills} (client, token) VALUES ('acme', $1)`, [`${token}`]),
        );
      await write(next.token);
      expect(await failure(() => write(old.token))).toBeInstanceOf(StaleTokenError);
      // A resource the holder raises itself right after acquiring is fenced as well.
      await fence.raise(`${lockName}/globex`, next.token);
      await bill("globex", next.token);
      expect(await failure(() => bill("globex", old.token))).toBeInstanceOf(StaleTokenError);
      const rows = await pool.query(`SELECT client, token FROM ${bills} ORDER BY client`);
      expect(rows.rows).toEqual([
        { client: "acme", token: `${next.token}` },
        { client: "globex", token: `${next.token}` },
      ]);
    });

    it("a token newer than the fence holds is refused too: nothing raised it for that grant", async () => {
      const fence = pgFence(pool);
      const resource = `job-${randomUUID()}`;
      await fence.raise(resource, 10n);
      const error = await failure(() => fence.transaction(resource, 11n, () => undefined));
      expectConfig(error, "resource", "holds token 10, not 11");
      expect(await fence.highest(resource)).toBe(10n);
    });

    it("raiseOnWrite: true raises the fence on a write, as a plain fenced store", async () => {
      const fence = pgFence(pool, { raiseOnWrite: true });
      const resource = `job-${randomUUID()}`;
      await fence.transaction(resource, 3n, () => undefined);
      expect(await fence.highest(resource)).toBe(3n);
      await fence.transaction(resource, 4n, () => undefined);
      expect(await fence.highest(resource)).toBe(4n);
      expect(await failure(() => fence.transaction(resource, 3n, () => undefined))).toBeInstanceOf(
        StaleTokenError,
      );
    });
  });
});
