import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
} from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { advisoryKey, migrate, PostgresBackend } from "../src/index.js";
import {
  decodeRecord,
  decodeWrittenVersion,
  encodeExpectedVersion,
} from "../src/postgres-codec.js";
import { schemaNames } from "../src/postgres-keys.js";
import { statements } from "../src/statements.js";
import { queuedRequests } from "./queued-requests.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 20 ms until it is true; throws after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await delay(20);
  }
}

/** The session's record methods, which every PostgreSQL session has. */
function records(session: BackendSession) {
  const { readRecord, writeRecord } = session;
  if (readRecord === undefined || writeRecord === undefined) throw new Error("no records");
  return {
    read: (key: string) => readRecord.call(session, key),
    write: (key: string, value: string, expected: string | null) =>
      writeRecord.call(session, key, value, expected),
  };
}

describe("postgres record versions (codec)", () => {
  it("a version this adapter hands out encodes as itself; anything else as no version", () => {
    for (const v of ["1", "2", "42", "9223372036854775807"])
      expect(encodeExpectedVersion(v)).toBe(v);
    for (const v of ["", "0", "01", "-1", "+1", "1.0", "1e3", " 1", "x", "9223372036854775808"]) {
      expect(encodeExpectedVersion(v)).toBeUndefined();
    }
    expect(decodeRecord([])).toBeNull();
    expect(decodeWrittenVersion([])).toBeNull();
  });
});

describeBackend("postgres", (url) => {
  describe("postgres records", () => {
    let admin: pg.Pool;
    const schemas: string[] = [];
    const backends: PostgresBackend[] = [];
    const roles: string[] = [];
    const ownSchema = () => {
      const schema = `baton_rec_${randomUUID().slice(0, 8)}`;
      schemas.push(schema);
      return schema;
    };
    const backend = (options: { schema?: string; migrate?: boolean; url?: string } = {}) => {
      const b = new PostgresBackend({ url, ...options });
      backends.push(b);
      return b;
    };
    const session = (b: PostgresBackend, ttlMs = 5_000) =>
      b.openSession({ ttlMs, ownerId: `records-${randomUUID().slice(0, 8)}` });
    /** The stored row of `key` in `schema`'s records table, as the server has it. */
    const row = async (schema: string, key: string) => {
      const { rows } = await admin.query(
        `SELECT value, version::text AS version FROM ${schema}.records WHERE key = $1`,
        [key],
      );
      return rows[0] as { value: string; version: string } | undefined;
    };

    beforeAll(() => {
      admin = new pg.Pool({ connectionString: url, max: 3 });
      admin.on("error", () => undefined);
    });
    afterEach(async () => {
      await Promise.allSettled(backends.splice(0).map((b) => b.close()));
    });
    afterAll(async () => {
      for (const schema of schemas) {
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      }
      for (const role of roles) {
        await admin.query(`DROP OWNED BY ${role}`).catch(() => undefined);
        await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      }
      await admin?.end();
    });

    it("the statements' rows decode to the record and its versions, whatever parses bigints", async () => {
      const schema = ownSchema();
      // A client that parses bigint columns as numbers, as some applications set up pg.
      const client = new pg.Client({
        connectionString: url,
        types: {
          getTypeParser: ((oid: number, format?: "text" | "binary") =>
            oid === 20
              ? Number
              : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
        },
      });
      client.on("error", () => undefined);
      await client.connect();
      try {
        await migrate(client, { schema });
        const sql = statements(schemaNames(`"${schema}"`));
        const query = async (s: { name: string; text: string }, values: unknown[]) =>
          (await client.query({ ...s, values })).rows;
        expect(decodeRecord(await query(sql.readRecord, ["k"]))).toBeNull();
        const before = BigInt(Date.now()) * 1_000n;
        const created = decodeWrittenVersion(await query(sql.createRecord, ["k", "one"]));
        // The server's clock in microseconds (its clock and this process's are one here).
        expect(created).toMatch(/^[1-9]\d{15}$/);
        expect(BigInt(created as string) >= before - 5_000_000n).toBe(true);
        expect(decodeWrittenVersion(await query(sql.createRecord, ["k", "again"]))).toBeNull();
        expect(decodeRecord(await query(sql.readRecord, ["k"]))).toEqual({
          value: "one",
          version: created,
        });
        const expected = encodeExpectedVersion(created as string);
        const updated = decodeWrittenVersion(await query(sql.updateRecord, ["k", "two", expected]));
        expect(BigInt(updated as string) > BigInt(created as string)).toBe(true);
        expect(
          decodeWrittenVersion(await query(sql.updateRecord, ["k", "stale", expected])),
        ).toBeNull();
        expect(decodeRecord(await query(sql.readRecord, ["k"]))).toEqual({
          value: "two",
          version: updated,
        });
        // A version ahead of the clock (a clock that went back since): the next one is above it.
        const ahead = String(BigInt(updated as string) + 3_600_000_000n);
        await client.query(`UPDATE "${schema}".records SET version = $1::bigint WHERE key = 'k'`, [
          ahead,
        ]);
        expect(decodeWrittenVersion(await query(sql.updateRecord, ["k", "three", ahead]))).toBe(
          String(BigInt(ahead) + 1n),
        );
      } finally {
        await client.end();
      }
    });

    it("migrate() creates a logged records table in a custom schema, which a backend with migrate: false uses", async () => {
      const schema = ownSchema();
      await migrate(admin, { schema });
      const table = await admin.query(
        `SELECT c.relpersistence AS persistence FROM pg_class c WHERE c.oid = to_regclass($1)`,
        [`${schema}.records`],
      );
      // 'p': permanent (WAL-logged), so records survive a server crash; the lock tables are
      // unlogged ('u').
      expect(table.rows).toEqual([{ persistence: "p" }]);
      const s = await session(backend({ schema, migrate: false }));
      const key = `migrated-${randomUUID()}`;
      const version = await records(s).write(key, "done", null);
      expect(await row(schema, key)).toEqual({ value: "done", version });
      expect(await records(s).read(key)).toEqual({ value: "done", version });
      // Only in that schema.
      const other = await session(backend());
      expect(await records(other).read(key)).toBeNull();
    });

    it("a write with a version the record does not have writes nothing", async () => {
      const schema = ownSchema();
      const s = await session(backend({ schema }));
      const key = `versions-${randomUUID()}`;
      const v1 = (await records(s).write(key, "one", null)) as string;
      const v2 = (await records(s).write(key, "two", v1)) as string;
      expect(await row(schema, key)).toEqual({ value: "two", version: v2 });
      for (const wrong of [
        v1,
        String(BigInt(v2) + 1n),
        "0",
        "01",
        "-1",
        "x",
        "99999999999999999999",
      ]) {
        expect(await records(s).write(key, `wrong-${wrong}`, wrong)).toBeNull();
      }
      expect(await records(s).write(key, "not-first", null)).toBeNull();
      // A record that does not exist has no version at all.
      expect(await records(s).write(`absent-${randomUUID()}`, "x", v1)).toBeNull();
      expect(await row(schema, key)).toEqual({ value: "two", version: v2 });
    });

    it("a record is readable from a new connection after the writer's session and backend closed", async () => {
      const schema = ownSchema();
      const writer = backend({ schema });
      const s = await session(writer, 1_000);
      const key = `survives-${randomUUID()}`;
      const version = await records(s).write(key, "kept", null);
      await s.close();
      await writer.close();
      // Past the writer's TTL: nothing of its session is left.
      await delay(1_500);
      const fresh = new pg.Client({ connectionString: url });
      fresh.on("error", () => undefined);
      await fresh.connect();
      try {
        const { rows } = await fresh.query(
          `SELECT value, version::text AS version FROM ${schema}.records WHERE key = $1`,
          [key],
        );
        expect(rows).toEqual([{ value: "kept", version }]);
      } finally {
        await fresh.end();
      }
      const reader = await session(backend({ schema, migrate: false }));
      expect(await records(reader).read(key)).toEqual({ value: "kept", version });
    });

    it("an installation migrated before records existed gets the table from a role with CREATE on the schema only", async () => {
      const schema = ownSchema();
      const role = `baton_rec_${randomUUID().slice(0, 8)}`;
      roles.push(role);
      // A role without CREATE on the database (PostgreSQL 15 grants PUBLIC none).
      await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB`);
      await migrate(admin, { schema });
      await admin.query(`DROP TABLE ${schema}.records`);
      await admin.query(
        `GRANT USAGE, CREATE ON SCHEMA ${schema} TO ${role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ${schema}.holders, ${schema}.sessions TO ${role};
         GRANT USAGE ON SEQUENCE ${schema}.token_seq TO ${role}`,
      );
      const s = await session(backend({ schema, url: url.replace("://postgres@", `://${role}@`) }));
      const key = `upgraded-${randomUUID()}`;
      const version = await records(s).write(key, "v", null);
      expect(await row(schema, key)).toEqual({ value: "v", version });
    });

    it("a role that may not add the records table keeps its locks; migrate() as that role says why", async () => {
      const schema = ownSchema();
      const role = `baton_rec_${randomUUID().slice(0, 8)}`;
      roles.push(role);
      await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB`);
      await migrate(admin, { schema });
      await admin.query(`DROP TABLE ${schema}.records`);
      await admin.query(
        `GRANT USAGE ON SCHEMA ${schema} TO ${role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ${schema}.holders, ${schema}.sessions TO ${role};
         GRANT USAGE ON SEQUENCE ${schema}.token_seq TO ${role}`,
      );
      const roleUrl = url.replace("://postgres@", `://${role}@`);
      // migrate: true (the default) tries to add the table, may not, and goes on with locks.
      const s = await session(backend({ schema, url: roleUrl }));
      const grant = await s.acquire(`lock-${randomUUID()}`, {
        wait: false,
        signal: new AbortController().signal,
      });
      expect(grant).not.toBeNull();
      const missing = await records(s)
        .read(`job-${randomUUID()}`)
        .catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(ConfigError);
      expect((missing as ConfigError).message).toContain("migrate()");
      const client = new pg.Client({ connectionString: roleUrl });
      client.on("error", () => undefined);
      await client.connect();
      try {
        const refused = await migrate(client, { schema }).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(ConfigError);
        expect((refused as ConfigError).field).toBe("privileges");
      } finally {
        await client.end();
      }
    });

    it("without the records table (migrate: false), locks work and runOnce says to run migrate()", async () => {
      const schema = ownSchema();
      await migrate(admin, { schema });
      await admin.query(`DROP TABLE ${schema}.records`);
      const coordinator = createCoordinator({
        backend: backend({ schema, migrate: false }),
        ttlMs: 5_000,
      });
      try {
        const lock = await coordinator.acquire(`lock-${randomUUID()}`);
        await lock.release();
        let ran = 0;
        const job = `job-${randomUUID()}`;
        const error = await coordinator.runOnce(job, "slot", () => ran++).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).field).toBe("schema");
        expect((error as ConfigError).message).toContain("migrate()");
        expect(ran).toBe(0);
        // Once migrated, the same backend keeps records.
        await migrate(admin, { schema });
        expect(await coordinator.runOnce(job, "slot", () => ran++)).toMatchObject({
          outcome: "ran",
        });
        expect(ran).toBe(1);
      } finally {
        await coordinator.close();
      }
    });

    it("a record call on a session waiting for a lock runs at once, and the wait goes on", async () => {
      const b = backend();
      // Long TTLs: the holder's connection stays while nothing renews it, and each wait on the
      // waiter's connection lasts a quarter of the TTL (15 s) unless interrupted.
      const holder = await session(b, 60_000);
      const waiter = await session(b, 60_000);
      const name = `waited-${randomUUID()}`;
      const signal = new AbortController().signal;
      const held = await holder.acquire(name, { wait: false, signal });
      expect(held).not.toBeNull();
      const waiting = waiter.acquire(name, { wait: true, signal });
      const queued = () => queuedRequests(admin, advisoryKey("baton", name));
      await until(async () => (await queued()) === 1, 5_000, "the wait is queued in the server");
      const key = `during-wait-${randomUUID()}`;
      const version = await records(waiter).write(key, "written", null);
      expect(await records(waiter).read(key)).toEqual({ value: "written", version });
      await until(async () => (await queued()) === 1, 5_000, "the wait is queued again");
      if (held !== null) await holder.release(held);
      const grant = await waiting;
      expect(grant).not.toBeNull();
      if (grant !== null) expect(await waiter.release(grant)).toBe(true);
    }, 12_000);

    it("a record write the server does not answer gives up after half the TTL", async () => {
      const schema = ownSchema();
      const s = await session(backend({ schema }), 1_000);
      const key = `blocked-${randomUUID()}`;
      const version = (await records(s).write(key, "one", null)) as string;
      const blocker = await admin.connect();
      try {
        // Another transaction holds the record's row, so the write waits for it.
        await blocker.query("BEGIN");
        await blocker.query(`SELECT 1 FROM ${schema}.records WHERE key = $1 FOR UPDATE`, [key]);
        const error = await records(s)
          .write(key, "two", version)
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain(`a PostgreSQL record write of "${key}"`);
        expect((error as Error).message).toContain("500 ms");
      } finally {
        await blocker.query("ROLLBACK");
        blocker.release();
      }
      // The write given up on still ran once the row was free; the record moved on from it.
      await until(async () => (await row(schema, key))?.value === "two", 5_000, "late write");
      expect(await records(s).write(key, "three", version)).toBeNull();
    });
  });
});
