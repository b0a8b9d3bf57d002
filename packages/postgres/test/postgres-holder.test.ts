import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresBackend } from "../src/index.js";

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

function coordinatorFor(url: string, schema: string, migrateSchema = true): Coordinator {
  const backend = new PostgresBackend({ url, schema, migrate: migrateSchema });
  const coordinator = createCoordinator({ backend, ttlMs: 10_000 });
  closers.push(() => coordinator.close());
  return coordinator;
}

/**
 * A lock held with a 10 s TTL, with a value (a holder row) and without (a token lock, in the
 * advisory mode): holder() tells the time left on it, from the server; none once released.
 */
async function checkRemaining(holding: Coordinator, observer: Coordinator): Promise<void> {
  for (const value of ["v", undefined]) {
    const name = `remaining-${randomUUID()}`;
    expect(await observer.holder(name)).toBeNull();
    const lock = await holding.acquire(name, value === undefined ? {} : { value });
    const holder = await observer.holder(name);
    expect(holder?.ownerId).toBe(holding.ownerId);
    expect(holder?.token).toBe(lock.token);
    expect(holder?.value).toBe(value);
    expect(holder?.remainingMs).toBeGreaterThan(0);
    expect(holder?.remainingMs).toBeLessThanOrEqual(10_000);
    // The session renews its lease: a read later still finds time left on it.
    await new Promise((r) => setTimeout(r, 500));
    expect((await observer.holder(name))?.remainingMs).toBeGreaterThan(0);
    // The holder itself reads it too.
    expect((await holding.holder(name))?.remainingMs).toBeGreaterThan(0);
    await lock.release();
    expect(await observer.holder(name)).toBeNull();
  }
}

describeBackend("postgres", (url) => {
  describe("holder() tells the time left on the lease (advisory locks)", () => {
    it("the holding connection's TTL less how long it has been idle", async () => {
      const schema = `holder_${randomUUID().slice(0, 8)}`;
      await checkRemaining(coordinatorFor(url, schema), coordinatorFor(url, schema));
    });

    it("the time left falls while the holder's connection is idle", async () => {
      const schema = `holder_${randomUUID().slice(0, 8)}`;
      const backend = new PostgresBackend({ url, schema });
      closers.push(() => backend.close());
      // A session nobody renews: its connection stays idle, so the server's timer runs.
      const session = await backend.openSession({ ttlMs: 20_000, ownerId: "idle" });
      const observer = coordinatorFor(url, schema);
      const name = `idle-${randomUUID()}`;
      const signal = new AbortController().signal;
      expect(await session.acquire(name, { wait: false, signal })).not.toBeNull();
      const first = (await observer.holder(name))?.remainingMs as number;
      await new Promise((r) => setTimeout(r, 1_200));
      const second = (await observer.holder(name))?.remainingMs as number;
      expect(first).toBeLessThanOrEqual(20_000);
      // At least 1 s of the idle wait shows, whatever the machine's load.
      expect(second).toBeLessThanOrEqual(first - 1_000);
      expect(second).toBeGreaterThan(0);
    });

    describe("a schema made before the sessions table recorded the TTL", () => {
      const schema = `holder_old_${randomUUID().slice(0, 8)}`;
      let admin: pg.Client;
      beforeAll(async () => {
        admin = new pg.Client({ connectionString: url });
        await admin.connect();
        await migrate(admin, { schema });
        await admin.query(`ALTER TABLE "${schema}".sessions DROP COLUMN ttl_ms`);
      });
      afterAll(async () => {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      });

      it("a role that does not own the table locks without it, and the other objects are made", async () => {
        const role = `baton_holder_${randomUUID().slice(0, 8)}`;
        await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB`);
        try {
          await admin.query(`DROP TABLE "${schema}".records`);
          await admin.query(
            `GRANT USAGE, CREATE ON SCHEMA "${schema}" TO ${role};
             GRANT SELECT, INSERT, UPDATE, DELETE ON "${schema}".holders, "${schema}".sessions TO ${role};
             GRANT USAGE ON SEQUENCE "${schema}".token_seq TO ${role}`,
          );
          // migrate: true (the default): it may not add the column, and goes on.
          const roleUrl = url.replace("://postgres@", `://${role}@`);
          const holding = coordinatorFor(roleUrl, schema);
          const name = `role-${randomUUID()}`;
          const lock = await holding.acquire(name);
          const holder = await holding.holder(name);
          expect(holder?.token).toBe(lock.token);
          expect(holder?.remainingMs).toBeUndefined();
          await lock.release();
          await holding.close();
          // The missing records table was made by that role all the same.
          const made = await admin.query("SELECT to_regclass($1) IS NOT NULL AS made", [
            `"${schema}".records`,
          ]);
          expect(made.rows[0]?.made).toBe(true);
        } finally {
          await admin.query(`DROP OWNED BY ${role}`).catch(() => undefined);
          await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
        }
      });

      it("locks work without it (time left unknown), and migrate() adds it", async () => {
        const name = `old-${randomUUID()}`;
        const holding = coordinatorFor(url, schema, false);
        const lock = await holding.acquire(name, { value: "v" });
        const holder = await holding.holder(name);
        expect(holder?.token).toBe(lock.token);
        expect(holder?.remainingMs).toBeUndefined();
        await lock.release();
        await migrate(admin, { schema });
        await checkRemaining(coordinatorFor(url, schema, false), coordinatorFor(url, schema));
      });
    });
  });
});

describeBackend("postgres-lease", (url) => {
  describe("holder() tells the time left on the lease (row leases)", () => {
    it("the session's expiry less the server's clock", async () => {
      await checkRemaining(createTracked(url), createTracked(url));
    });
  });
});

function createTracked(url: string): Coordinator {
  const coordinator = createCoordinator({ url, ttlMs: 10_000 });
  closers.push(() => coordinator.close());
  return coordinator;
}
