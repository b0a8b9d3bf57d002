import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock } from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

describeBackend("postgres", (url) => {
  describe("postgres waits", () => {
    let admin: pg.Pool;
    let backend: PostgresBackend;
    const coordinators: Coordinator[] = [];
    const coordinator = () => {
      const c = createCoordinator({ backend, ttlMs: 5_000 });
      coordinators.push(c);
      return c;
    };

    beforeAll(() => {
      admin = new pg.Pool({ connectionString: url, max: 2 });
      admin.on("error", () => undefined);
      backend = new PostgresBackend({ url });
    });
    afterEach(async () => {
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await backend?.close();
      await admin?.end();
    });

    it("waits cancelled at the moment of a release never leave a lock behind", async () => {
      const a = coordinator();
      const b = coordinator();
      const c = coordinator();
      for (let i = 0; i < 15; i++) {
        const name = `cancel-race-${randomUUID()}`;
        const held = await a.acquire(name);
        const controller = new AbortController();
        const waiting: Promise<Lock | Error> = b
          .acquire(name, { signal: controller.signal })
          .catch((e: unknown) => e as Error);
        await new Promise((resolve) => setTimeout(resolve, 20 + (i % 5) * 5));
        controller.abort(new Error("gave up"));
        await held.release();
        const outcome = await waiting;
        if (!(outcome instanceof Error)) await outcome.release(); // it won the race: fine
        const next = await c.acquire(name, { waitMs: 2_000 });
        await next.release();
      }
      const waiterLocks = await admin.query(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND a.application_name = 'baton-waiter'`,
      );
      expect(waiterLocks.rows[0].n).toBe(0);
    });

    it("watch() pushes the end of the holder's connection at once, not after the TTL", async () => {
      const name = `watch-${randomUUID()}`;
      const holder = createCoordinator({ backend, ttlMs: 20_000 });
      coordinators.push(holder);
      const observer = coordinator();
      const lock = await holder.acquire(name, { value: "node-a" });
      const controller = new AbortController();
      const iterator = observer.watch(name, { signal: controller.signal })[Symbol.asyncIterator]();
      try {
        const first = await iterator.next();
        expect(first.value).toMatchObject({ ownerId: holder.ownerId, token: lock.token });
        const { rows } = await admin.query(
          "SELECT pid FROM baton.holders WHERE owner = $1 AND token = $2",
          [holder.ownerId, lock.token.toString()],
        );
        const killedAt = performance.now();
        await admin.query("SELECT pg_terminate_backend($1)", [rows[0].pid]);
        const next = await iterator.next();
        expect(next.value).toBeNull();
        expect(performance.now() - killedAt).toBeLessThan(3_000);
      } finally {
        controller.abort();
        await iterator.return?.();
      }
    });

    it("local waiters of one key take turns in arrival order, one woken per release", async () => {
      const name = `turns-${randomUUID()}`;
      const holder = coordinator();
      const first = await holder.acquire(name);
      const order: number[] = [];
      const waiters: Promise<void>[] = [];
      for (let i = 0; i < 5; i++) {
        const c = coordinator();
        waiters.push(
          c.withLock(name, () => {
            order.push(i);
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      await first.release();
      await Promise.all(waiters);
      expect(order).toEqual([0, 1, 2, 3, 4]);
    });
  });
});
