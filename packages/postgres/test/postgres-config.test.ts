import { randomUUID } from "node:crypto";
import { inspect } from "node:util";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, createBackend, createCoordinator, parseBackendUrl } from "@baton/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  advisoryKey,
  DEFAULT_MIGRATE,
  DEFAULT_NAMESPACE,
  DEFAULT_SCHEMA,
  migrate,
  PostgresBackend,
  postgresOptionsFromUrl,
} from "../src/index.js";

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("postgres options (no I/O)", () => {
  it("bad options and URLs are a ConfigError naming the field", () => {
    expect(configError(() => new PostgresBackend({})).field).toBe("options");
    expect(
      configError(() => new PostgresBackend({ url: "postgres://h/db", config: {} })).field,
    ).toBe("options");
    expect(configError(() => new PostgresBackend({ url: "postgres://h/db?pool=3" })).field).toBe(
      "url",
    );
    expect(configError(() => new PostgresBackend({ url: "postgres://a:1,b:2/db" })).field).toBe(
      "url",
    );
    expect(
      configError(() => new PostgresBackend({ url: "postgres://h/db?sslmode=maybe" })).field,
    ).toBe("url");
    expect(
      configError(() => new PostgresBackend({ url: "postgres://h/db", schema: "bad-name" })).field,
    ).toBe("schema");
    expect(
      configError(() => new PostgresBackend({ url: "postgres://h/db?schema=x%3By" })).field,
    ).toBe("schema");
    expect(
      configError(() => new PostgresBackend({ url: "postgres://h/db", namespace: "" })).field,
    ).toBe("namespace");
    expect(
      configError(() => new PostgresBackend({ url: "postgres://h/db", maxConnections: 3 } as never))
        .field,
    ).toBe("options.maxConnections");
  });

  it("reads host, port, user, database, schema and namespace from the URL", () => {
    const backend = new PostgresBackend({
      url: "postgresql://app:s%40cret@db.example:6543/billing?schema=locks&namespace=invoices",
    });
    expect(backend.options.connection).toMatchObject({
      host: "db.example",
      port: 6543,
      user: "app",
      password: "s@cret",
      database: "billing",
    });
    expect(backend.options.schema).toBe("locks");
    expect(backend.options.namespace).toBe("invoices");
  });

  it("maps every libpq sslmode to pg's TLS setting", () => {
    const ssl = (mode: string) =>
      new PostgresBackend({ url: `postgres://h/db?sslmode=${mode}` }).options.connection.ssl;
    expect(ssl("disable")).toBe(false);
    // pg makes one attempt: allow takes libpq's first (no TLS), prefer insists on TLS.
    expect(ssl("allow")).toBe(false);
    expect(ssl("prefer")).toEqual({ rejectUnauthorized: false });
    expect(ssl("require")).toEqual({ rejectUnauthorized: false });
    expect(ssl("no-verify")).toEqual({ rejectUnauthorized: false });
    const verifyCa = ssl("verify-ca") as {
      rejectUnauthorized?: boolean;
      checkServerIdentity: () => unknown;
    };
    expect(verifyCa.rejectUnauthorized).toBeUndefined();
    expect(verifyCa.checkServerIdentity()).toBeUndefined();
    expect(ssl("verify-full")).toBe(true);
    const bad = configError(() => new PostgresBackend({ url: "postgres://h/db?sslmode=maybe" }));
    expect(bad.field).toBe("url");
    expect(bad.message).toMatch(
      /"sslmode" must be one of disable, allow, prefer, require, verify-ca, verify-full, no-verify, got "maybe"/,
    );
  });

  it("reads connect_timeout in seconds as libpq does: 0 is no limit, at least 2", () => {
    const timeout = (text: string) =>
      new PostgresBackend({ url: `postgres://h/db?connect_timeout=${text}` }).options.connection
        .connectionTimeoutMillis;
    expect(timeout("10")).toBe(10_000);
    expect(timeout("1")).toBe(2_000);
    expect(timeout("0")).toBe(0);
    for (const text of ["-1", "1.5", "ten", "", "86401"]) {
      const error = configError(
        () => new PostgresBackend({ url: `postgres://h/db?connect_timeout=${text}` }),
      );
      expect(error.field).toBe("url");
      expect(error.message).toContain('"connect_timeout"');
    }
  });

  it("reads a unix socket directory from host= (with port=) or a percent-encoded host", () => {
    expect(
      new PostgresBackend({
        url: "postgres://app:pw@/billing?host=/var/run/postgresql&port=5433",
      }).options.connection,
    ).toMatchObject({
      host: "/var/run/postgresql",
      port: 5433,
      user: "app",
      password: "pw",
      database: "billing",
    });
    expect(
      new PostgresBackend({ url: "postgres://%2Ftmp%2Fpg:5433/billing" }).options.connection,
    ).toMatchObject({ host: "/tmp/pg", port: 5433, database: "billing" });
    for (const [url, message] of [
      ["postgres:///db?host=db.example", /"host" must be a unix socket directory/],
      ["postgres://db.example/db?host=/tmp", /and the parameter "host"/],
      ["postgres://db.example:5432/db?port=5433", /and the parameter "port"/],
      ["postgres:///db?host=/tmp&port=0", /"port" must be a number from 1 to 65535/],
      ["postgres:///db?host=/tmp&port=5432x", /"port" must be a number/],
    ] as const) {
      const error = configError(() => new PostgresBackend({ url }));
      expect(error.field, url).toBe("url");
      expect(error.message, url).toMatch(message);
    }
  });

  it("postgresOptionsFromUrl gives the backend options of a URL, and refuses what the backend would", () => {
    const url = parseBackendUrl(
      "postgres://app:pw@db.example:6543/billing?schema=locks&namespace=inv",
    );
    const options = postgresOptionsFromUrl(url);
    expect(options).toEqual({
      config: { host: "db.example", port: 6543, user: "app", password: "pw", database: "billing" },
      schema: "locks",
      namespace: "inv",
    });
    const backend = new PostgresBackend(options);
    expect(backend.options.connection).toMatchObject({ host: "db.example", port: 6543 });
    expect(backend.options.schema).toBe("locks");
    expect(postgresOptionsFromUrl(parseBackendUrl("postgres://h/db"))).toEqual({
      config: { host: "h", port: 5432, database: "db" },
    });
    const defaults = new PostgresBackend(
      postgresOptionsFromUrl(parseBackendUrl("postgres://h/db")),
    );
    expect(defaults.options.schema).toBe(DEFAULT_SCHEMA);
    expect(defaults.options.namespace).toBe(DEFAULT_NAMESPACE);
    expect(defaults.options.migrate).toBe(DEFAULT_MIGRATE);
    for (const [text, field] of [
      ["postgres://h/db?prefx=a", "url"],
      ["postgres://h/db?schema=x%3By", "schema"],
      ["postgres://h/db?namespace=", "namespace"],
    ] as const) {
      expect(configError(() => postgresOptionsFromUrl(parseBackendUrl(text))).field, text).toBe(
        field,
      );
    }
  });

  it("an unknown parameter is a ConfigError naming it", () => {
    for (const url of ["postgres://h/db?prefx=a", "postgresql://h/db?sslmod=require"]) {
      const error = configError(() => new PostgresBackend({ url }));
      expect(error.field).toBe("url");
      expect(error.message).toMatch(/unknown parameter "(prefx|sslmod)"/);
    }
  });

  it("reads credentials by WHATWG rules and never prints them in an error", () => {
    expect(
      new PostgresBackend({ url: "postgres://app:pa@ss@db.example/billing" }).options.connection,
    ).toMatchObject({ host: "db.example", user: "app", password: "pa@ss", database: "billing" });
    for (const [url, secret] of [
      ["postgres://app:s3/cret@db.example:5432/billing", "s3"],
      ["postgres://app:s3?cret@db.example/billing", "s3"],
      ["postgres://app:hunter2@db.example/billing?prefx=1", "hunter2"],
      ["postgres://app:hunter2@a:1,b:2/billing", "hunter2"],
      ["postgres://app:hunter2@db.example/billing?sslmode=maybe", "hunter2"],
      ["postgres://app:hunter2@db.example:0/billing", "hunter2"],
      ["postgres://app:hunter2@db.example/billing?password=hunter2", "hunter2"],
    ] as const) {
      const error = configError(() => new PostgresBackend({ url }));
      expect(inspect(error, { depth: 10 }), url).not.toContain(secret);
    }
  });

  it("hashes names to stable 64-bit keys that differ by namespace", () => {
    const a = advisoryKey("baton", "invoices");
    expect(advisoryKey("baton", "invoices")).toBe(a);
    expect(advisoryKey("other", "invoices")).not.toBe(a);
    expect(a).toBeGreaterThanOrEqual(-(2n ** 63n));
    expect(a).toBeLessThan(2n ** 63n);
  });
});

describeBackend("postgres", (url) => {
  describe("postgres privileges and URL registration", () => {
    let admin: pg.Pool;
    const role = `baton_np_${randomUUID().slice(0, 8)}`;
    const schema = `baton_np_${randomUUID().slice(0, 8)}`;
    const roleUrl = () => url.replace("://postgres@", `://${role}@`);

    beforeAll(async () => {
      admin = new pg.Pool({ connectionString: url, max: 2 });
      admin.on("error", () => undefined);
      // A role without CREATE on the database (PostgreSQL 15 grants PUBLIC none).
      await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB`);
    });
    afterAll(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await admin.query(`DROP OWNED BY ${role}`).catch(() => undefined);
      await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      await admin?.end();
    });

    it("missing privileges give a ConfigError that says which, until they are granted", async () => {
      const backend = new PostgresBackend({ url: roleUrl(), schema });
      const c = createCoordinator({ backend, ttlMs: 5_000 });
      try {
        // 1. The schema does not exist and the role may not create it.
        const noCreate = await c.acquire("job").catch((e: unknown) => e);
        expect(noCreate).toBeInstanceOf(ConfigError);
        expect((noCreate as ConfigError).field).toBe("privileges");
        expect((noCreate as ConfigError).message).toContain(`role "${role}"`);
        expect((noCreate as ConfigError).message).toContain("CREATE on the database");

        // 2. A privileged role migrated it, but the role may not use the schema.
        await migrate(admin, { schema });
        const noUsage = await c.acquire("job").catch((e: unknown) => e);
        expect(noUsage).toBeInstanceOf(ConfigError);
        expect((noUsage as ConfigError).message).toContain(`schema "${schema}"`);

        // 3. USAGE on the schema, but nothing on the table and sequence.
        await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
        const noTable = await c.acquire("job").catch((e: unknown) => e);
        expect(noTable).toBeInstanceOf(ConfigError);
        expect((noTable as ConfigError).field).toBe("privileges");
        expect((noTable as ConfigError).message).toMatch(/permission denied for (table|sequence)/);

        // 4. The tables but not the sequence: the lock taken before nextval failed is given back.
        await admin.query(
          `GRANT SELECT, INSERT, UPDATE, DELETE ON ${schema}.holders, ${schema}.sessions TO ${role}`,
        );
        const noSequence = await c.acquire("job").catch((e: unknown) => e);
        expect(noSequence).toBeInstanceOf(ConfigError);
        expect((noSequence as ConfigError).message).toContain("sequence");
        const leaked = await admin.query(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND a.usename = $1`,
          [role],
        );
        expect(leaked.rows[0].n).toBe(0);

        // 5. Granted: it works.
        await admin.query(`GRANT USAGE ON SEQUENCE ${schema}.token_seq TO ${role}`);
        const lock = await c.acquire("job", { waitMs: 2_000 });
        expect(typeof lock.token).toBe("bigint");
        await lock.release();
      } finally {
        await c.close();
        await backend.close();
      }
    });

    it("connects through a unix socket named by host= and port=", async () => {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      const dirs = await admin.query("SHOW unix_socket_directories");
      await admin.end();
      const dir = String(dirs.rows[0].unix_socket_directories).split(",")[0]?.trim() as string;
      const port = new URL(url).port;
      const backend = new PostgresBackend({
        url: `postgres://postgres@/postgres?host=${encodeURIComponent(dir)}&port=${port}`,
      });
      try {
        expect(backend.options.connection.host).toBe(dir);
        const session = await backend.openSession({ ttlMs: 5_000, ownerId: "socket" });
        await session.close();
      } finally {
        await backend.close();
      }
    });

    it("createBackend() loads this package for postgres:// and postgresql://", async () => {
      for (const scheme of ["postgres", "postgresql"]) {
        const backend = await createBackend(url.replace(/^postgres/, scheme));
        try {
          expect(backend.kind).toBe("postgres");
          const session = await backend.openSession({ ttlMs: 5_000, ownerId: "probe" });
          await session.close();
        } finally {
          await backend.close();
        }
      }
    });

    it("takes a user's pg.Pool or pg config, opens its own dedicated connections, never ends the pool", async () => {
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      pool.on("error", () => undefined);
      const fromPool = new PostgresBackend({ pool });
      const fromConfig = new PostgresBackend({ config: { connectionString: url } });
      try {
        const name = `pool-${randomUUID()}`;
        const a = createCoordinator({ backend: fromPool, ttlMs: 5_000 });
        const b = createCoordinator({ backend: fromConfig, ttlMs: 5_000 });
        const lock = await a.acquire(name);
        expect(await b.tryAcquire(name)).toBeNull();
        // The one pooled connection is free for the application while the lock is held.
        const busy = await pool.query(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
        );
        expect(busy.rows[0].n).toBe(0);
        await lock.release();
        expect(await b.tryAcquire(name)).not.toBeNull();
        await Promise.all([a.close(), b.close()]);
      } finally {
        await fromPool.close();
        await fromConfig.close();
      }
      expect(pool.ended).toBe(false);
      expect((await pool.query("SELECT 1 AS one")).rows[0].one).toBe(1);
      await pool.end();
    });

    it("with migrate: false, missing schema objects are a ConfigError that says to run migrate()", async () => {
      const backend = new PostgresBackend({
        url,
        schema: `absent_${randomUUID().slice(0, 8)}`,
        migrate: false,
      });
      const error = await backend
        .openSession({ ttlMs: 5_000, ownerId: "x" })
        .catch((e: unknown) => e);
      await backend.close();
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("schema");
      expect((error as ConfigError).message).toContain("migrate()");
    });

    it("a wrong database is a ConfigError, an unreachable server BackendUnavailableError", async () => {
      const wrongDb = new PostgresBackend({ url: url.replace(/\/postgres$/, "/no_such_db") });
      const error = await wrongDb
        .openSession({ ttlMs: 5_000, ownerId: "x" })
        .catch((e: unknown) => e);
      await wrongDb.close();
      expect(error).toBeInstanceOf(ConfigError);
      const closed = new PostgresBackend({ url: "postgres://postgres@127.0.0.1:1/postgres" });
      const unreachable = await closed
        .openSession({ ttlMs: 5_000, ownerId: "x" })
        .catch((e: unknown) => e);
      await closed.close();
      expect((unreachable as { code?: string }).code).toBe("BATON_BACKEND_UNAVAILABLE");
    });
  });
});
