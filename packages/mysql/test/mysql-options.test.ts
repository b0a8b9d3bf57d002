import { ConfigError, parseBackendUrl } from "@baton/core";
import mysql from "mysql2";
import mysqlPromise from "mysql2/promise";
import { afterEach, describe, expect, it } from "vitest";
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_MODE,
  DEFAULT_NAMESPACE,
  DEFAULT_TABLE_PREFIX,
  MysqlBackend,
  mysqlOptionsFromUrl,
} from "../src/index.js";
import { resolveMysqlOptions } from "../src/mysql-options.js";

const fromUrl = (url: string) => mysqlOptionsFromUrl(parseBackendUrl(url));

/** The ConfigError `f` throws: its field and message. */
function configError(f: () => unknown): { field: string; message: string } {
  try {
    f();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return { field: (error as ConfigError).field, message: (error as Error).message };
  }
  throw new Error("no ConfigError thrown");
}

describe("mysql:// and mariadb:// URLs", () => {
  it("give host, port, user, password and database; defaults for the rest", () => {
    const options = resolveMysqlOptions(fromUrl("mysql://app:s%40cret@db1:3307/billing"));
    expect(options.connection).toEqual({
      host: "db1",
      port: 3307,
      user: "app",
      password: "s@cret",
      database: "billing",
      connectTimeout: DEFAULT_CONNECT_TIMEOUT_MS,
    });
    expect(options.mode).toBe(DEFAULT_MODE);
    expect(options.mode).toBe("named-lock");
    expect(options.namespace).toBe(DEFAULT_NAMESPACE);
    expect(options.tablePrefix).toBe(DEFAULT_TABLE_PREFIX);
    expect(options.migrate).toBe(true);
  });

  it("mariadb:// is the same, port 3306 by default", () => {
    const options = resolveMysqlOptions(fromUrl("mariadb://db1/app"));
    expect(options.connection).toMatchObject({ host: "db1", port: 3306, database: "app" });
  });

  it("reads mode, namespace, tablePrefix, connectTimeout, ssl and socketPath", () => {
    const options = resolveMysqlOptions(
      fromUrl(
        "mysql://app@localhost/app?mode=row-lease&namespace=billing-v2&tablePrefix=locks_&connectTimeout=2500&ssl=no-verify",
      ),
    );
    expect(options.mode).toBe("row-lease");
    expect(options.namespace).toBe("billing-v2");
    expect(options.tablePrefix).toBe("locks_");
    expect(options.connection.connectTimeout).toBe(2500);
    expect(options.connection.ssl).toEqual({ rejectUnauthorized: false });
    expect(resolveMysqlOptions(fromUrl("mysql://h/app?ssl=true")).connection.ssl).toEqual({});
    expect(resolveMysqlOptions(fromUrl("mysql://h/app?ssl=false")).connection.ssl).toBeUndefined();
    const socket = resolveMysqlOptions(
      fromUrl("mysql://app@localhost/app?socketPath=/run/mysqld/mysqld.sock"),
    );
    expect(socket.connection.socketPath).toBe("/run/mysqld/mysqld.sock");
    expect(socket.connection.host).toBeUndefined();
  });

  it.each([
    ["mysql://h/app?prefx=x", "url", /unknown parameter "prefx"/],
    ["mysql://h/app?mode=advisory", "url", /"mode" must be one of named-lock, row-lease/],
    ["mysql://h/app?connectTimeout=soon", "url", /connectTimeout/],
    ["mysql://h/app?ssl=maybe", "url", /"ssl" must be/],
    ["mysql://h/app?socketPath=run/x.sock", "url", /socketPath/],
    ["mysql://h1,h2/app", "url", /more than one host/],
    ["mysql://h", "url", /names no database/],
    ["mysql://h/a/b", "url", /bad database name/],
    ["mysql://h/app?namespace=Billing", "namespace", /lower-case/],
    ["mysql://h/app?namespace=a-namespace-over-twenty", "namespace", /1 to 20/],
    ["mysql://h/app?tablePrefix=x-", "tablePrefix", /letters, digits/],
  ])("%s is a ConfigError on %s before any I/O", (url, field, message) => {
    const error = configError(() => new MysqlBackend({ url }));
    expect(error.field).toBe(field);
    expect(error.message).toMatch(message);
  });

  it("another scheme is refused", () => {
    expect(configError(() => fromUrl("postgres://h/app")).message).toMatch(
      /mysql:\/\/ or mariadb:\/\//,
    );
  });
});

describe("options objects", () => {
  const pools: { end(): unknown }[] = [];
  afterEach(() => {
    for (const pool of pools.splice(0)) pool.end();
  });

  it("exactly one of url, pool and config", () => {
    expect(configError(() => new MysqlBackend({})).field).toBe("options");
    expect(
      configError(() => new MysqlBackend({ url: "mysql://h/a", config: { database: "a" } })).field,
    ).toBe("options");
    expect(
      configError(() => new MysqlBackend({ config: { database: "a" }, prefix: "x" } as never))
        .field,
    ).toBe("options.prefix");
  });

  it("checks mode, migrate and the database of config", () => {
    expect(
      configError(() => new MysqlBackend({ config: { database: "a" }, mode: "lease" as never }))
        .field,
    ).toBe("mode");
    expect(
      configError(() => new MysqlBackend({ config: { database: "a" }, migrate: "yes" as never }))
        .field,
    ).toBe("migrate");
    expect(configError(() => new MysqlBackend({ config: { host: "h" } })).field).toBe("config");
  });

  it("takes a mysql2 callback pool's connection settings, without the pool itself", () => {
    const pool = mysql.createPool({
      host: "db2",
      port: 3310,
      user: "u",
      password: "p",
      database: "app",
    });
    pools.push(pool);
    const backend = new MysqlBackend({ pool, mode: "row-lease" });
    expect(backend.options.connection).toMatchObject({
      host: "db2",
      port: 3310,
      user: "u",
      password: "p",
      database: "app",
    });
    expect(backend.options.connection).not.toHaveProperty("pool");
    expect(backend.options.pool).toBe(pool);
    expect(backend.endpoint).toBe("db2:3310");
    expect(backend.guarantees.inspection).toBe(true);
  });

  it("takes a mysql2/promise pool the same way", () => {
    const pool = mysqlPromise.createPool({ host: "db3", user: "u", database: "app" });
    pools.push(pool);
    const backend = new MysqlBackend({ pool });
    expect(backend.options.connection).toMatchObject({ host: "db3", port: 3306, database: "app" });
  });

  it("a pool that is no mysql2 pool is a ConfigError on pool", () => {
    expect(configError(() => new MysqlBackend({ pool: 42 as never })).field).toBe("pool");
    const noDatabase = mysql.createPool({ host: "db2" });
    pools.push(noDatabase);
    expect(configError(() => new MysqlBackend({ pool: noDatabase })).field).toBe("pool");
  });
});
