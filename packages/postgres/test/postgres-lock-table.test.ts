import { describeBackend, type StartedServers, startServers } from "@baton/conformance/harness";
import { ConfigError, type Coordinator, createCoordinator, type Lock } from "@baton/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// A server of its own with a small shared lock table (room for a few hundred entries over all
// connections), so that a session fills it quickly without touching the shared test server.
describeBackend("postgres", () => {
  describe("postgres lock table full", () => {
    let servers: StartedServers | undefined;
    let coordinator: Coordinator | undefined;

    beforeAll(async () => {
      servers = await startServers({
        backends: ["postgres"],
        provider: "local",
        postgresSettings: ["max_locks_per_transaction=10", "max_connections=20"],
      });
    }, 60_000);
    afterAll(async () => {
      await coordinator?.close();
      await servers?.stop();
    });

    it("fails the acquire that finds the lock table full at once, and keeps every lock held", async () => {
      const url = servers?.servers.postgres;
      if (url === undefined) throw new Error("the PostgreSQL server did not start");
      const ttlMs = 2_000;
      coordinator = createCoordinator({ backend: new PostgresBackend({ url }), ttlMs });
      const held: Lock[] = [];
      let failure: unknown;
      let failedAfterMs = 0;
      for (let i = 0; i < 100_000 && failure === undefined; i++) {
        const t = performance.now();
        try {
          held.push(await coordinator.acquire(`table/${i}`, { waitMs: 30_000 }));
        } catch (error) {
          failure = error;
          failedAfterMs = performance.now() - t;
        }
      }
      expect(held.length).toBeGreaterThan(10);
      expect(failure).toBeInstanceOf(ConfigError);
      expect((failure as ConfigError).field).toBe("max_locks_per_transaction");
      expect((failure as Error).message).toMatch(/lock table is full/);
      // Told at once, not retried until the wait runs out.
      expect(failedAfterMs).toBeLessThan(15_000);

      // Renewals go on while the table stays full: nothing held is lost.
      await delay(ttlMs * 2);
      expect(held.filter((lock) => !lock.held)).toEqual([]);
      expect(held.filter((lock) => lock.signal.aborted)).toEqual([]);

      // Released, the room is back.
      await Promise.all(held.splice(0, 50).map((lock) => lock.release()));
      const again = await coordinator.acquire("table/again", { waitMs: 5_000 });
      expect(again.held).toBe(true);
      await again.release();
      await Promise.all(held.map((lock) => lock.release()));
    }, 120_000);
  });
});
