import { ConfigError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { checkNamedLockTtl } from "../src/mysql-session.js";
import { type Connection, refuseUnsafePath } from "../src/named-lock-connection.js";

/**
 * A connection that answers `SHOW VARIABLES LIKE 'wsrep_on'` with `wsrep` (no row when
 * undefined, as MySQL without Galera answers) and `SELECT CONNECTION_ID()` with the next of
 * `ids`, and whose handshake gave `threadId`.
 */
function fakeConnection(options: { wsrep?: string; ids: number[]; threadId: number }): Connection {
  const ids = [...options.ids];
  return {
    threadId: options.threadId,
    query(query: { sql: string }, callback: (error: Error | null, result?: unknown) => void) {
      if (query.sql.startsWith("SHOW VARIABLES")) {
        const rows =
          options.wsrep === undefined ? [] : [{ Variable_name: "wsrep_on", Value: options.wsrep }];
        callback(null, rows);
      } else if (query.sql.includes("CONNECTION_ID()")) {
        callback(null, [{ id: ids.shift() ?? 0 }]);
      } else {
        callback(new Error(`unexpected statement ${query.sql}`));
      }
    },
  } as unknown as Connection;
}

/** The error `refuseUnsafePath` rejects with, or undefined when it accepts. */
async function refusal(connection: Connection): Promise<unknown> {
  return refuseUnsafePath(connection, "db1:3306").then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("named-lock mode: servers and paths it refuses", () => {
  it("accepts a plain server (MariaDB with wsrep_on OFF, or MySQL without the variable)", async () => {
    expect(await refusal(fakeConnection({ wsrep: "OFF", ids: [7, 7], threadId: 7 }))).toBe(
      undefined,
    );
    expect(await refusal(fakeConnection({ ids: [7, 7], threadId: 7 }))).toBe(undefined);
  });

  it("refuses a Galera node with a ConfigError that names the row-lease mode", async () => {
    const error = await refusal(fakeConnection({ wsrep: "ON", ids: [7, 7], threadId: 7 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain("Galera");
    expect((error as ConfigError).message).toContain("db1:3306");
    expect((error as ConfigError).message).toContain("?mode=row-lease");
  });

  it("refuses a connection whose statements run on changing server connections (a pooler)", async () => {
    const error = await refusal(fakeConnection({ wsrep: "OFF", ids: [7, 9], threadId: 7 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain("served by server connection 7, then 9");
    expect((error as ConfigError).message).toContain("?mode=row-lease");
  });

  it("refuses a proxy whose handshake id is not the server's connection id (ProxySQL)", async () => {
    const error = await refusal(fakeConnection({ wsrep: "OFF", ids: [31, 31], threadId: 4 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain("the handshake gave connection id 4");
    expect((error as ConfigError).message).toContain("proxy or a pooler");
  });
});

describe("named-lock mode: TTLs", () => {
  it("takes whole seconds, the unit of the server's idle limit", () => {
    for (const ttlMs of [1_000, 2_000, 30_000])
      expect(() => checkNamedLockTtl(ttlMs)).not.toThrow();
  });

  it.for([500, 1_500, 2_250, 0, -1_000, Number.NaN])(
    "refuses %s ms with a ConfigError naming ttlMs",
    (ttlMs) => {
      let thrown: unknown;
      try {
        checkNamedLockTtl(ttlMs);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).field).toBe("ttlMs");
      expect((thrown as ConfigError).message).toContain("whole seconds");
    },
  );
});
