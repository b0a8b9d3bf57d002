import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { publishedDeclarationImports } from "@baton/conformance/harness";
import pg from "pg";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  migrate,
  type PgClientLike,
  type PgConnectionConfig,
  type PgPoolLike,
  PostgresBackend,
  pgFence,
  type Queryable,
} from "../src/index.js";

const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

describe("published declarations", () => {
  it("name only @baton/core and Node's own modules, never pg's types", async () => {
    expect(await publishedDeclarationImports(src)).toEqual(["@baton/core", "node:tls"]);
  }, 180_000);

  it("describe pools and clients by their shape, which pg's Pool, Client and PoolClient have", async () => {
    expectTypeOf<pg.Pool>().toExtend<PgPoolLike>();
    expectTypeOf<pg.Pool>().toExtend<Queryable>();
    expectTypeOf<pg.Client>().toExtend<Queryable>();
    expectTypeOf<pg.PoolClient>().toExtend<PgClientLike>();
    expectTypeOf<pg.ClientConfig>().toExtend<PgConnectionConfig>();
    expectTypeOf<pg.Pool["options"]>().toExtend<PgConnectionConfig>();
    const pool = new pg.Pool({ host: "127.0.0.1", port: 1, database: "app" });
    const client = new pg.Client({ host: "127.0.0.1", port: 1 });
    const config: pg.ClientConfig = { host: "127.0.0.1", port: 1, ssl: false };
    const fromPool = new PostgresBackend({ pool });
    expect(fromPool.options.pool).toBe(pool);
    expect(fromPool.options.connection).toMatchObject({ host: "127.0.0.1", port: 1 });
    expect(new PostgresBackend({ config }).options.connection).toMatchObject(config);
    const fence = pgFence(pool);
    // A transaction's client is the pool's own type when the caller names it.
    expectTypeOf(fence.transaction<void, pg.PoolClient>)
      .parameter(2)
      .parameter(0)
      .toEqualTypeOf<pg.PoolClient>();
    // migrate() and a fence's check() take a client or a pool.
    expectTypeOf(migrate).toBeCallableWith(client);
    expectTypeOf(migrate).toBeCallableWith(pool);
    expectTypeOf(fence.check).toBeCallableWith(client, "resource", 1n);
    await pool.end();
    await fromPool.close();
  });
});
