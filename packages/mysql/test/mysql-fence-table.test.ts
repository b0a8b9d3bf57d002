import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  MemoryBackend,
  StaleTokenError,
} from "@baton/core";
import mysql from "mysql2/promise";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mysqlFence } from "../src/mysql-fence.js";

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

describe("mysqlFence options are checked at construction", () => {
  // Never connects: every check is before any I/O.
  const pool = mysql.createPool({ host: "127.0.0.1", port: 1 });
  afterAll(() => pool.end());

  it("table and column names must be plain identifiers, each option named", async () => {
    expectConfig(await failure(() => mysqlFence(pool, { table: "a.b.c" })), "table");
    expectConfig(await failure(() => mysqlFence(pool, { table: "x`; DROP" })), "table");
    expectConfig(await failure(() => mysqlFence(pool, { table: "t".repeat(65) })), "table");
    expectConfig(
      await failure(() => mysqlFence(pool, { resourceColumn: "job; drop" })),
      "resourceColumn",
    );
    expectConfig(
      await failure(() => mysqlFence(pool, { tokenColumn: 7 as unknown as string })),
      "tokenColumn",
    );
    expectConfig(
      await failure(() => mysqlFence(pool, { resourceColumn: "job", tokenColumn: "JOB" })),
      "tokenColumn",
    );
    expectConfig(await failure(() => mysqlFence(pool, { timeoutMs: 0 })), "timeoutMs");
    expectConfig(await failure(() => mysqlFence(pool, { timeoutMs: 1.5 })), "timeoutMs");
    expectConfig(
      await failure(() => mysqlFence(pool, { raiseOnWrite: "yes" as unknown as boolean })),
      "raiseOnWrite",
    );
    expectConfig(
      await failure(() => mysqlFence(pool, { columns: [] } as never)),
      "options.columns",
    );
    // A 64-character name is the longest MySQL and MariaDB accept.
    expect(mysqlFence(pool, { table: `db.${"t".repeat(64)}` }).table).toBe(
      `\`db\`.\`${"t".repeat(64)}\``,
    );
  });

  it("a pool must be a mysql2 pool, and a URL is checked too, naming no credential", async () => {
    expectConfig(await failure(() => mysqlFence({} as never)), "pool");
    expectConfig(await failure(() => mysqlFence("redis://u:secret@h:6379")), "url");
    const error = await failure(() => mysqlFence("mysql://u:secret@h/db?namespace=x"));
    expectConfig(error, "url", "table option");
    expect((error as Error).message).not.toContain("secret");
    // The callback API's pool is taken through its promise() form.
    const callbackPool = (await import("mysql2")).createPool({ host: "127.0.0.1", port: 1 });
    expect(mysqlFence(callbackPool).table).toBe("`baton_fence`");
    await new Promise<void>((resolve) => callbackPool.end(() => resolve()));
  });

  it("a resource or token of the wrong type is a ConfigError before any I/O", async () => {
    const fence = mysqlFence(pool);
    expectConfig(await failure(() => fence.raise("", 1n)), "resource");
    expectConfig(await failure(() => fence.raise("x", 1 as unknown as bigint)), "token");
    expectConfig(await failure(() => fence.raise("x", 1n, { ttlMs: -1 })), "ttlMs");
    expectConfig(await failure(() => fence.check({} as never, "x", 1n)), "connection");
    expectConfig(await failure(() => fence.transaction("x", 1n, "f" as never)), "fn");
  });
});

describeBackend("mysql", (url) => {
  describe("mysqlFence on a table of your own", () => {
    let pool: mysql.Pool;
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
      pool = mysql.createPool({ uri: url, connectionLimit: 4 });
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      for (const t of tables) await pool?.query(`DROP TABLE IF EXISTS ${t}`).catch(() => undefined);
      await pool?.end();
    });

    const correctness = (fence: ReturnType<typeof mysqlFence>) => {
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
      const jobFence = await table(
        "job_fence",
        "job VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, last_token BIGINT NOT NULL",
      );
      const [[database]] = await pool.query<mysql.RowDataPacket[]>("SELECT DATABASE() AS db");
      const fence = mysqlFence(pool, {
        table: `${database?.db}.${jobFence}`,
        resourceColumn: "job",
        tokenColumn: "last_token",
      });
      const c = correctness(fence);
      const old = await c.acquire("nightly-invoices");
      await old.release();
      const lock = await c.acquire("nightly-invoices");
      const [rows] = await pool.query<mysql.RowDataPacket[]>(
        `SELECT job, CAST(last_token AS CHAR) AS last_token FROM ${jobFence}`,
      );
      expect(rows).toEqual([{ job: "nightly-invoices", last_token: `${lock.token}` }]);
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
      const jobFence = await table(
        "job_fence",
        "job VARBINARY(255) PRIMARY KEY, last_token BIGINT NOT NULL",
      );
      const fence = mysqlFence(pool, { table: jobFence });
      const error = await failure(() => fence.raise("x", 1n));
      expectConfig(
        error,
        "resourceColumn",
        `has no column "resource" (its columns: job, last_token)`,
      );
      const tokenMissing = mysqlFence(pool, { table: jobFence, resourceColumn: "job" });
      expectConfig(await failure(() => tokenMissing.migrate()), "tokenColumn", "last_token");
      // In correctness mode the acquire rejects with the same error, and the grant is given back.
      const c = correctness(fence);
      expectConfig(await failure(() => c.acquire("x", { waitMs: 0 })), "resourceColumn");
      expect(await c.holder("x")).toBeNull();
    });

    it("a table that cannot serve as a fence says what to change", async () => {
      const named = { resourceColumn: "job", tokenColumn: "last_token" };
      const check = async (columns: string, field: string, text: string) => {
        const t = await table("bad_fence", columns);
        expectConfig(
          await failure(() => mysqlFence(pool, { table: t, ...named }).migrate()),
          field,
          text,
        );
      };
      await check(
        "job VARBINARY(255) PRIMARY KEY, last_token INT NOT NULL",
        "tokenColumn",
        "BIGINT",
      );
      await check(
        "job VARBINARY(255), last_token BIGINT NOT NULL",
        "resourceColumn",
        "ADD PRIMARY KEY",
      );
      await check(
        "job VARBINARY(255), last_token BIGINT NOT NULL, PRIMARY KEY (job, last_token)",
        "resourceColumn",
        "ADD PRIMARY KEY",
      );
      await check("job INT PRIMARY KEY, last_token BIGINT NOT NULL", "resourceColumn", "VARBINARY");
      await check(
        "job VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, last_token BIGINT NOT NULL",
        "resourceColumn",
        "COLLATE utf8mb4_bin",
      );
      const view = await table(
        "view_base",
        "job VARBINARY(255) PRIMARY KEY, last_token BIGINT NOT NULL",
      );
      await pool.query(`CREATE VIEW ${view}_v AS SELECT * FROM ${view}`);
      tables.push(`${view}_v`);
      expectConfig(
        await failure(() => mysqlFence(pool, { table: `${view}_v`, ...named }).migrate()),
        "table",
        "not a table",
      );
      const extra = await table(
        "extra_col",
        "job VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, last_token DECIMAL(20) NOT NULL, owner VARCHAR(20) NOT NULL",
      );
      const withExtra = mysqlFence(pool, { table: extra, ...named });
      expectConfig(await failure(() => withExtra.migrate()), "table", '"owner"');
      await pool.query(`ALTER TABLE ${extra} ALTER COLUMN owner SET DEFAULT 'baton'`);
      await withExtra.raise("y", 5n); // VARCHAR and DECIMAL columns serve once the default exists
      expect(await withExtra.highest("y")).toBe(5n);
      await expect(withExtra.raise("y", 4n)).rejects.toBeInstanceOf(StaleTokenError);
    });

    it("a table with an AUTO_INCREMENT id of its own still tells a stale raise from a new one", async () => {
      const withId = await table(
        "with_id",
        "id BIGINT AUTO_INCREMENT PRIMARY KEY, job VARBINARY(255) NOT NULL UNIQUE, last_token BIGINT NOT NULL",
      );
      await pool.query(`ALTER TABLE ${withId} AUTO_INCREMENT = 1000`);
      const fence = mysqlFence(pool, {
        table: withId,
        resourceColumn: "job",
        tokenColumn: "last_token",
      });
      await fence.raise("a", 5n);
      await fence.raise("a", 5n);
      await fence.raise("b", 2_000n);
      const stale = await failure(() => fence.raise("a", 4n));
      expect(stale).toBeInstanceOf(StaleTokenError);
      expect((stale as StaleTokenError).highest).toBe(5n);
      expect(await fence.highest("a")).toBe(5n);
    });
  });

  describe("mysqlFence refuses writes under a resource the lock did not raise", () => {
    let pool: mysql.Pool;
    const bills = `bills_${randomUUID().slice(0, 8)}`;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      pool = mysql.createPool({ uri: url, connectionLimit: 4 });
      await pool.query(`CREATE TABLE ${bills} (client VARCHAR(20), token BIGINT NOT NULL)`);
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${bills}`).catch(() => undefined);
      await pool?.end();
    });

    it("a stale holder billing under a per-client resource is refused, not let through", async () => {
      const fence = mysqlFence(pool);
      const backend = new MemoryBackend();
      const coordinator = () => {
        const c = createCoordinator({ backend, ttlMs: 5_000, mode: "correctness", fence });
        coordinators.push(c);
        return c;
      };
      const lockName = `billing-${randomUUID()}`;
      const bill = (client: string, token: bigint) =>
        fence.transaction(`${lockName}/${client}`, token, (db) =>
          db.query(`INSERT INTO ${bills} (client, token) VALUES (?, ?)`, [client, `${token}`]),
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
      const [none] = await pool.query<mysql.RowDataPacket[]>(`SELECT * FROM ${bills}`);
      expect(none).toEqual([]);

      // Under the lock's name, the new holder writes and the stale one is rejected.
      const write = (token: bigint) =>
        fence.transaction(lockName, token, (db) =>
          db.query(`INSERT INTO ${bills} (client, token) VALUES ('acme', ?)`, [`${token}`]),
        );
      await write(next.token);
      expect(await failure(() => write(old.token))).toBeInstanceOf(StaleTokenError);
      // A resource the holder raises itself right after acquiring is fenced as well.
      await fence.raise(`${lockName}/globex`, next.token);
      await bill("globex", next.token);
      expect(await failure(() => bill("globex", old.token))).toBeInstanceOf(StaleTokenError);
      const [rows] = await pool.query<mysql.RowDataPacket[]>(
        `SELECT client, CAST(token AS CHAR) AS token FROM ${bills} ORDER BY client`,
      );
      expect(rows).toEqual([
        { client: "acme", token: `${next.token}` },
        { client: "globex", token: `${next.token}` },
      ]);
    });

    it("a token newer than the fence holds is refused too: nothing raised it for that grant", async () => {
      const fence = mysqlFence(pool);
      const resource = `job-${randomUUID()}`;
      await fence.raise(resource, 10n);
      const error = await failure(() => fence.transaction(resource, 11n, () => undefined));
      expectConfig(error, "resource", "holds token 10, not 11");
      expect(await fence.highest(resource)).toBe(10n);
    });

    it("raiseOnWrite: true raises the fence on a write, as a plain fenced store", async () => {
      const fence = mysqlFence(pool, { raiseOnWrite: true });
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
