import { randomUUID } from "node:crypto";
import { describeBackend, freePort } from "@baton/conformance/harness";
import {
  AuthenticationError,
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  type Lock,
  MemoryBackend,
  SessionLostError,
} from "@baton/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend, pgFence } from "../src/index.js";
import {
  describeTarget,
  endedConnection,
  openSessionContext,
  sqlState,
  toBatonError,
  waitEndedEmpty,
} from "../src/postgres-errors.js";

const dbError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe("PostgreSQL errors say what failed, where, and what to do", () => {
  it("57P01 (a restart, pg_terminate_backend) is BackendUnavailableError, never the raw driver error", () => {
    const raw = dbError("57P01", "terminating connection due to administrator command");
    const error = toBatonError(raw, "could not open a PostgreSQL session at db1:5432/app");
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(error.message).toContain("57P01");
    expect(error.message).toContain("restarting");
    expect(error.message).toContain("db1:5432/app");
    expect(error.cause).toBe(raw);
  });

  it("a refused connection names the server, not a schema step", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 10.0.0.9:5433"), {
      code: "ECONNREFUSED",
    });
    const context = openSessionContext({ host: "db1", port: 5433, database: "app" });
    const error = toBatonError(refused, context);
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(error.message).toContain("PostgreSQL session at db1:5433/app: could not connect");
    expect(error.message).toContain("ECONNREFUSED 10.0.0.9:5433");
    expect(error.message).not.toContain("schema");
    expect(error.message).toMatch(/check that the server runs there/);
  });

  it("toBatonError: a BatonError passes through; a refused login is AuthenticationError, databases and privileges ConfigError", () => {
    const lost = new SessionLostError("gone");
    expect(toBatonError(lost, "anything")).toBe(lost);
    const cases = [
      ["28P01", "url"],
      ["28000", "url"],
      ["3D000", "url"],
      ["42501", "privileges"],
    ] as const;
    for (const [code, field] of cases) {
      const error = toBatonError(dbError(code, `failed with ${code}`), "doing it");
      expect(error, code).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field, code).toBe(field);
      expect(error.message, code).toContain("doing it: ");
      // A refused login is the named error every backend reports for bad credentials.
      const login = code === "28P01" || code === "28000";
      expect(error instanceof AuthenticationError, code).toBe(login);
      expect(error.code, code).toBe(login ? "BATON_AUTH" : "BATON_CONFIG");
    }
    const old = toBatonError(
      dbError("42704", 'unrecognized configuration parameter "idle_session_timeout"'),
      "opening",
    );
    expect(old).toBeInstanceOf(ConfigError);
    expect(old.message).toContain("PostgreSQL 14 or newer");
    const other = toBatonError(dbError("XX000", "internal error"), "PostgreSQL query failed");
    expect(other).toBeInstanceOf(BackendUnavailableError);
    expect(other.message).toBe("PostgreSQL query failed: internal error");
    expect(toBatonError("not an Error", "x")).toBeInstanceOf(BackendUnavailableError);
  });

  it("which failures end the connection, and which end a wait without a lock", () => {
    for (const code of ["57P01", "57P02", "57P05", "08006", "08003"]) {
      expect(endedConnection(dbError(code, code)), code).toBe(true);
    }
    for (const code of ["57014", "55P03", "40P01", "42501"]) {
      expect(endedConnection(dbError(code, code)), code).toBe(false);
    }
    for (const code of ["57014", "55P03", "40P01"]) {
      expect(waitEndedEmpty(dbError(code, code)), code).toBe(true);
    }
    for (const code of ["57P01", "08006", "XX000"]) {
      expect(waitEndedEmpty(dbError(code, code)), code).toBe(false);
    }
    expect(sqlState(dbError("not-a-state", "x"))).toBeUndefined();
    expect(sqlState(new Error("no code"))).toBeUndefined();
  });

  it("describeTarget prints host, port and database, never the user or password", () => {
    const target = describeTarget({
      host: "db1",
      port: 5433,
      user: "u",
      password: "s3cret",
      database: "app",
    });
    expect(target).toBe("db1:5433/app");
    expect(describeTarget({ host: "/var/run/postgresql" })).toContain("unix socket");
  });

  it("a server that is down: openSession rejects naming host and port, without the password", async () => {
    const port = await freePort();
    const backend = new PostgresBackend({ url: `postgres://baton:s3cret@127.0.0.1:${port}/app` });
    try {
      const error = await backend.openSession({ ttlMs: 1_000, ownerId: "o" }).then(
        () => expect.unreachable("opened a session on a closed port"),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      const message = (error as Error).message;
      expect(message).toContain(`PostgreSQL session at 127.0.0.1:${port}/app: could not connect`);
      expect(message).not.toContain("schema");
      expect(message).not.toContain("s3cret");
    } finally {
      await backend.close();
    }
  });
});

describeBackend("postgres", (url) => {
  describe("a fence raise whose connection the server ends (57P01)", () => {
    let pool: pg.Pool;
    let admin: pg.Pool;
    beforeAll(() => {
      pool = new pg.Pool({ connectionString: url, max: 4 });
      pool.on("error", () => undefined);
      admin = new pg.Pool({ connectionString: url, max: 2 });
      admin.on("error", () => undefined);
    });
    afterAll(async () => {
      await pool?.end();
      await admin?.end();
    });

    /** Ends the fence's own connection while it waits on `resource`'s row. */
    const terminateWaitingRaise = async (resource: string, fenceTable: string) => {
      const blocker = await admin.connect();
      await blocker.query("BEGIN");
      await blocker.query(`SELECT 1 FROM ${fenceTable} WHERE resource = $1 FOR UPDATE`, [resource]);
      const blockerPid = (
        (await blocker.query("SELECT pg_backend_pid() AS pid")).rows[0] as { pid: number }
      ).pid;
      return {
        async whileBlocked(): Promise<void> {
          for (let i = 0; i < 200; i++) {
            // Only the raise blocked by this row lock: other tests share the database, and
            // their own lock waiters must not be the ones terminated.
            const { rows } = await admin.query(
              "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
              [blockerPid],
            );
            const pid = (rows[0] as { pid: number } | undefined)?.pid;
            if (pid !== undefined) {
              await admin.query("SELECT pg_terminate_backend($1)", [pid]);
              return;
            }
            await new Promise((r) => setTimeout(r, 25));
          }
          throw new Error("the raise never waited on the fence row");
        },
        async end(): Promise<void> {
          await blocker.query("ROLLBACK").catch(() => undefined);
          blocker.release();
        },
      };
    };

    it("pgFence.raise rejects with BackendUnavailableError carrying 57P01", async () => {
      const fence = pgFence(pool);
      const resource = `restart-${randomUUID().slice(0, 8)}`;
      await fence.raise(resource, 1n);
      const block = await terminateWaitingRaise(resource, fence.table);
      try {
        const raising = fence.raise(resource, 2n, { ttlMs: 10_000 }).then(
          () => undefined,
          (e: unknown) => e,
        );
        await block.whileBlocked();
        const error = await raising;
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain(resource);
        expect(((error as Error).cause as { code?: string }).code).toBe("57P01");
      } finally {
        await block.end();
      }
    });

    it("correctness mode: acquire rejects with BackendUnavailableError, not pg's DatabaseError", async () => {
      const fence = pgFence(pool);
      const name = `restart-${randomUUID().slice(0, 8)}`;
      const coordinator = createCoordinator({
        backend: new MemoryBackend(),
        ttlMs: 10_000,
        mode: "correctness",
        fence,
      });
      try {
        const first: Lock = await coordinator.acquire(name, { waitMs: 0 });
        await first.release();
        const block = await terminateWaitingRaise(name, fence.table);
        try {
          const acquiring = coordinator.acquire(name, { waitMs: 0 }).then(
            () => undefined,
            (e: unknown) => e,
          );
          await block.whileBlocked();
          const error = await acquiring;
          expect(error).toBeInstanceOf(BackendUnavailableError);
          expect(error).not.toBeInstanceOf(pg.DatabaseError);
          expect(((error as Error).cause as { code?: string }).code).toBe("57P01");
        } finally {
          await block.end();
        }
      } finally {
        await coordinator.close();
      }
    });
  });
});

describe("a postgres backend's endpoint (no I/O)", () => {
  it("host and port from a URL, a config or a pool's connection string; never the user or password", () => {
    const endpoint = (options: ConstructorParameters<typeof PostgresBackend>[0]) =>
      new PostgresBackend(options).endpoint;
    expect(endpoint({ url: "postgres://app:s3cret@db1.example:6432/app" })).toBe(
      "db1.example:6432",
    );
    expect(endpoint({ url: "postgres://app:s3cret@db1.example/app" })).toBe("db1.example:5432");
    expect(endpoint({ url: "postgres://app@[::1]:5433/app" })).toBe("[::1]:5433");
    expect(endpoint({ config: { host: "db2", port: 5999, password: "s3cret" } })).toBe("db2:5999");
    expect(endpoint({ config: { host: "/run/postgresql" } })).toBe("/run/postgresql");
    const pool = new pg.Pool({ connectionString: "postgres://app:s3cret@db3.example:7000/app" });
    try {
      expect(endpoint({ pool })).toBe("db3.example:7000");
    } finally {
      void pool.end();
    }
  });
});
