import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError } from "@baton/core";
import mysqlPromise from "mysql2/promise";
import { afterAll, beforeAll, expect, it } from "vitest";
import { getLockName, MysqlBackend, migrate } from "../src/index.js";

/** Baton's tables with the default prefix. */
const TABLES = [
  "baton_holders",
  "baton_lease_revocations",
  "baton_lease_sessions",
  "baton_leases",
  "baton_records",
  "baton_tokens",
].sort();

describeBackend("mysql-lease", (url) => {
  let admin: mysqlPromise.Connection;
  const databases: string[] = [];

  /** A new, empty database and the URL of it. */
  async function freshDatabase(): Promise<{ database: string; url: string }> {
    const database = `t_${randomUUID().slice(0, 8)}`;
    await admin.query(`CREATE DATABASE \`${database}\``);
    databases.push(database);
    const at = new URL(url.replace(/^mariadb:/, "http:"));
    at.pathname = `/${database}`;
    at.search = "";
    return { database, url: `mysql:${at.href.slice("http:".length)}` };
  }

  async function tablesOf(database: string): Promise<string[]> {
    const [rows] = await admin.query(
      "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ? ORDER BY 1",
      [database],
    );
    return (rows as { t: string }[]).map((row) => row.t).sort();
  }

  /** Settings of a connection to the harness's database. */
  function settings(): mysqlPromise.ConnectionOptions {
    const at = new URL(url.replace(/^mariadb:/, "http:"));
    return {
      host: at.hostname,
      port: Number(at.port),
      user: decodeURIComponent(at.username),
      password: decodeURIComponent(at.password),
      database: at.pathname.slice(1),
    };
  }

  beforeAll(async () => {
    admin = await mysqlPromise.createConnection(settings());
  });

  afterAll(async () => {
    for (const database of databases) await admin.query(`DROP DATABASE \`${database}\``);
    await admin.end();
  });

  it("migrate() creates every table, and again (also five at once) changes nothing", async () => {
    const { database, url: dbUrl } = await freshDatabase();
    const pool = mysqlPromise.createPool(dbUrl.replace(/^mysql:/, "mysql:"));
    try {
      await migrate(pool);
      expect(await tablesOf(database)).toEqual(TABLES);
      const [before] = await pool.query("SELECT CAST(value AS CHAR) AS v FROM baton_tokens");
      await Promise.all(Array.from({ length: 5 }, () => migrate(pool)));
      await migrate(pool.pool);
      expect(await tablesOf(database)).toEqual(TABLES);
      const [after] = await pool.query("SELECT CAST(value AS CHAR) AS v FROM baton_tokens");
      // The counter keeps counting: migrating again never resets it.
      expect(after).toEqual(before);
      expect((after as { v: string }[]).length).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it("migrate() with another prefix makes tables of that prefix; a bad prefix is a ConfigError", async () => {
    const { database, url: dbUrl } = await freshDatabase();
    const connection = await mysqlPromise.createConnection(dbUrl);
    try {
      await migrate(connection, { tablePrefix: "locks_" });
      expect(await tablesOf(database)).toEqual(
        TABLES.map((t) => t.replace("baton_", "locks_")).sort(),
      );
      await expect(migrate(connection, { tablePrefix: "bad-prefix" })).rejects.toBeInstanceOf(
        ConfigError,
      );
    } finally {
      await connection.end();
    }
  });

  it("with migrate: false and no tables, opening a session is a ConfigError naming migrate()", async () => {
    const { database, url: dbUrl } = await freshDatabase();
    const backend = new MysqlBackend({ url: dbUrl, mode: "row-lease", migrate: false });
    try {
      const opening = backend.openSession({ ownerId: "o", ttlMs: 1_000 });
      await expect(opening).rejects.toBeInstanceOf(ConfigError);
      await expect(opening).rejects.toThrow(/run migrate\(\) once/);
      expect(await tablesOf(database)).toEqual([]);
    } finally {
      await backend.close();
    }
  });

  it("a token counter made again after its table was dropped starts above every earlier token", async () => {
    const { url: dbUrl } = await freshDatabase();
    const connection = await mysqlPromise.createConnection(dbUrl);
    try {
      await migrate(connection);
      await connection.query("UPDATE baton_tokens SET value = LAST_INSERT_ID(value + 1)");
      const [[first]] = (await connection.query("SELECT CAST(LAST_INSERT_ID() AS CHAR) AS v")) as [
        { v: string }[],
        unknown,
      ];
      await connection.query("DROP TABLE baton_tokens");
      await migrate(connection);
      await connection.query("UPDATE baton_tokens SET value = LAST_INSERT_ID(value + 1)");
      const [[second]] = (await connection.query("SELECT CAST(LAST_INSERT_ID() AS CHAR) AS v")) as [
        { v: string }[],
        unknown,
      ];
      expect(BigInt(second?.v ?? "0")).toBeGreaterThan(BigInt(first?.v ?? "0"));
    } finally {
      await connection.end();
    }
  });

  it("GET_LOCK takes every name getLockName() makes, and long names that share 64 characters are two locks", async () => {
    const other = await mysqlPromise.createConnection(settings());
    try {
      const first = `${"x".repeat(64)}-first`;
      const second = `${"x".repeat(64)}-second`;
      for (const name of [first, "Ünïcödé 😀", "a".repeat(256)]) {
        const [rows] = await admin.query("SELECT GET_LOCK(?, 0) AS got", [
          getLockName("baton", name),
        ]);
        expect((rows as { got: number }[])[0]?.got).toBe(1);
      }
      // Held by the first connection; the second name is another lock, free for the other one.
      const [taken] = await other.query("SELECT GET_LOCK(?, 0) AS got", [
        getLockName("baton", first),
      ]);
      expect((taken as { got: number }[])[0]?.got).toBe(0);
      const [free] = await other.query("SELECT GET_LOCK(?, 0) AS got", [
        getLockName("baton", second),
      ]);
      expect((free as { got: number }[])[0]?.got).toBe(1);
    } finally {
      await admin.query("SELECT RELEASE_ALL_LOCKS()");
      await other.end();
    }
  });
});
