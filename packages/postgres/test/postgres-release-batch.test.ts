import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock } from "@baton/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";
import { named } from "./application-name.js";

/** The advisory locks held by connections of `application`, as `pg_locks` shows them. */
async function advisoryLocks(url: string, application: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`,
      [application],
    );
    return rows[0].n as number;
  } finally {
    await client.end();
  }
}

describeBackend("postgres", (url) => {
  describe("postgres releases of one turn", () => {
    let backend: PostgresBackend | undefined;
    afterAll(async () => {
      await backend?.close();
    });

    it("releases many locks at once and leaves nothing held at the server, token locks included", async () => {
      const application = `release-batch-${process.pid}`;
      backend = new PostgresBackend({ url: named(url, application) });
      const session = await backend.openSession({ ttlMs: 5_000, ownerId: "batch" });
      try {
        const signal = new AbortController().signal;
        // Grants with a value keep their token in a holder row; those without, in a token lock
        // (while their tag is free): both kinds in one turn.
        const grants = await Promise.all(
          Array.from({ length: 200 }, (_, i) =>
            session.acquire(`batch/${i}`, {
              wait: false,
              signal,
              ...(i % 2 === 0 ? { value: `v${i}` } : {}),
            }),
          ),
        );
        expect(grants.every((g) => g !== null)).toBe(true);
        expect(await advisoryLocks(url, application)).toBeGreaterThan(200);

        const released = await Promise.all(
          grants.map((g) => (g === null ? false : session.release(g))),
        );
        expect(released).toEqual(grants.map(() => true));
        expect(await advisoryLocks(url, application)).toBe(0);

        // A grant released twice in one turn: the second is told it held nothing.
        const again = await session.acquire("batch/twice", { wait: false, signal });
        if (again === null) throw new Error("batch/twice was not granted");
        expect(await Promise.all([session.release(again), session.release(again)])).toEqual([
          true,
          false,
        ]);
        expect(await advisoryLocks(url, application)).toBe(0);
      } finally {
        await session.close();
      }
    });

    it("a release runs before the statements asked for after it in the same turn", async () => {
      const own = new PostgresBackend({ url });
      const session = await own.openSession({ ttlMs: 5_000, ownerId: "order" });
      try {
        const signal = new AbortController().signal;
        for (const value of [undefined, "with a value"]) {
          const options = { wait: false, signal, ...(value === undefined ? {} : { value }) };
          const first = await session.acquire("order/first", options);
          const second = await session.acquire("order/second", options);
          if (first === null || second === null) throw new Error("order/* was not granted");
          expect(await session.holder("order/second")).not.toBeNull();
          // Asked for in this order, in one turn (the second release waits for the turn's
          // end to go with others): the read still sees the key free.
          const [released, holder] = await Promise.all([
            Promise.all([session.release(first), session.release(second)]),
            session.holder("order/second"),
          ]);
          expect(released).toEqual([true, true]);
          expect(holder).toBeNull();
        }
      } finally {
        await session.close();
        await own.close();
      }
    });
  });

  // A server of its own: 15,000 advisory locks take most of a default shared lock table.
  describe("postgres close with many locks", () => {
    let servers: StartedServers | undefined;
    const coordinators: Coordinator[] = [];

    beforeAll(async () => {
      servers = await startServers({
        backends: ["postgres"],
        provider: "local",
        postgresSettings: ["max_locks_per_transaction=1000", "max_connections=40"],
      });
    }, 60_000);
    afterAll(async () => {
      for (const c of coordinators) await c.close();
      await servers?.stop();
    });

    it("closes a coordinator holding 15,000 locks in time, with no loss reported, and frees them", async () => {
      const url = servers?.servers.postgres;
      if (url === undefined) throw new Error("the PostgreSQL server did not start");
      const coordinator = createCoordinator({
        backend: new PostgresBackend({ url }),
        ttlMs: 5_000,
        ownerId: "many",
      });
      coordinators.push(coordinator);
      const trouble: string[] = [];
      coordinator.on("sessionLost", ({ error }) => trouble.push(`sessionLost: ${error}`));
      coordinator.on("renewFailed", ({ error }) => trouble.push(`renewFailed: ${error}`));
      coordinator.on("backgroundError", ({ error }) => trouble.push(`background: ${error}`));
      const count = 15_000;
      const locks: Lock[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next < count) {
            const i = next++;
            locks.push(await coordinator.acquire(`many/${i}`, { waitMs: 30_000 }));
          }
        }),
      );
      expect(locks.length).toBe(count);
      expect(trouble).toEqual([]);

      // Each statement on a connection holding n advisory locks costs the server O(n): one
      // release statement per lock would take far longer than the close's bound (one TTL).
      await coordinator.close();
      expect(trouble).toEqual([]);
      expect(locks.filter((l) => l.held)).toEqual([]);

      const other = createCoordinator({ backend: new PostgresBackend({ url }), ttlMs: 5_000 });
      coordinators.push(other);
      const lock = await other.acquire(`many/${count - 1}`, { waitMs: 0 });
      expect(lock.held).toBe(true);
      await lock.release();
    }, 120_000);
  });
});
