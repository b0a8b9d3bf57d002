import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  BackendUnavailableError,
  type Coordinator,
  createCoordinator,
  siblingModuleArgs,
} from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { pgFence } from "../src/index.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A child process running fenced-writer.ts, its JSON events, and its exit. */
interface Writer {
  readonly child: ChildProcess;
  readonly events: Array<Record<string, string>>;
  readonly exited: Promise<number | null>;
  next(event: string, timeoutMs: number): Promise<Record<string, string>>;
}

function startWriter(env: Record<string, string>): Writer {
  const args = siblingModuleArgs(import.meta.url, "./fenced-writer");
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const events: Array<Record<string, string>> = [];
  let buffer = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8");
  child.stdout?.on("data", (chunk: string) => {
    buffer += chunk;
    for (let at = buffer.indexOf("\n"); at >= 0; at = buffer.indexOf("\n")) {
      events.push(JSON.parse(buffer.slice(0, at)) as Record<string, string>);
      buffer = buffer.slice(at + 1);
    }
  });
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  const next = async (event: string, timeoutMs: number) => {
    const started = performance.now();
    for (;;) {
      const found = events.find((e) => e.event === event || e.event === "rejected");
      if (found !== undefined) return found;
      if (performance.now() - started > timeoutMs || child.exitCode !== null) {
        throw new Error(
          `no "${event}" from the writer (events ${JSON.stringify(events)}) ${stderr}`,
        );
      }
      await delay(20);
    }
  };
  return { child, events, exited, next };
}

describeBackend("postgres", (url) => {
  describe("pgFence: a holder paused inside a fenced transaction", () => {
    let pool: pg.Pool;
    const bills = `bills_${randomUUID().slice(0, 8)}`;
    const coordinators: Coordinator[] = [];
    const writers: Writer[] = [];

    beforeAll(async () => {
      pool = new pg.Pool({ connectionString: url, max: 6 });
      pool.on("error", () => undefined);
      await pgFence(pool).migrate();
      await pool.query(`CREATE TABLE ${bills} (client_id int, token bigint NOT NULL)`);
    });
    afterEach(async () => {
      for (const w of writers.splice(0)) {
        w.child.kill("SIGCONT");
        w.child.kill("SIGKILL");
        await w.exited;
      }
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
    });
    afterAll(async () => {
      await pool?.query(`DROP TABLE IF EXISTS ${bills}`).catch(() => undefined);
      await pool?.end();
    });

    const correctness = (ttlMs: number, fence = pgFence(pool)) => {
      const c = createCoordinator({ url, ttlMs, mode: "correctness", fence });
      coordinators.push(c);
      return c;
    };

    it("the next holder gets the lock within about a TTL, and the woken holder's commit is rejected", async () => {
      const ttlMs = 2_000;
      const name = `paused-${randomUUID()}`;
      const writer = startWriter({
        BATON_URL: url,
        BATON_TTL_MS: String(ttlMs),
        BATON_NAME: name,
        BATON_BILLS: bills,
      });
      writers.push(writer);
      const inside = await writer.next("in-transaction", 20_000);
      expect(inside.event).toBe("in-transaction");
      writer.child.kill("SIGSTOP"); // frozen with the fence row locked by its transaction

      // The fence row stays locked until the server ends the frozen transaction (its
      // idle_in_transaction_session_timeout), about a TTL after the freeze; the wait allows
      // for the lease itself, that and slack, not for the frozen holder to wake.
      const next = correctness(ttlMs);
      const lock = await next.acquire(name, { waitMs: 3 * ttlMs + 2_000 });
      expect(lock.token).toBeGreaterThan(BigInt(inside.token as string));
      const fence = pgFence(pool);
      await fence.transaction(name, lock.token, (client) =>
        client.query(`INSERT INTO ${bills} (client_id, token) VALUES (3, $1)`, [`${lock.token}`]),
      );

      writer.child.kill("SIGCONT");
      const outcome = await writer.next("committed", 20_000);
      expect(outcome).toMatchObject({ event: "rejected", name: "BackendUnavailableError" });
      expect(outcome.message).toContain("nothing of it was committed");
      // Nothing of the frozen holder's transaction landed, not even the bill before the freeze.
      const rows = await pool.query(`SELECT client_id, token FROM ${bills} ORDER BY client_id`);
      expect(rows.rows).toEqual([{ client_id: 3, token: `${lock.token}` }]);
      // And the woken process ends on its own (nothing of Baton's keeps it alive).
      expect(await writer.exited).toBe(0);
    });

    it("a raise given up on never commits later, and its pool can end while the row is still locked", async () => {
      const ttlMs = 1_500;
      const name = `abandoned-${randomUUID()}`;
      const admin = pgFence(pool);
      await admin.raise(name, 1n);
      const blocker = await pool.connect();
      const ownPool = new pg.Pool({ connectionString: url, max: 2 });
      ownPool.on("error", () => undefined);
      try {
        await blocker.query("BEGIN");
        await blocker.query("SELECT 1 FROM baton.fence WHERE resource = $1 FOR UPDATE", [name]);
        // The coordinator gives the raise one TTL; the fence's own lock_timeout is longer, so
        // it is the coordinator that gives up here.
        const c = correctness(ttlMs, pgFence(ownPool, { timeoutMs: 60_000 }));
        const error = await c.acquire(name, { waitMs: 1_500 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        await c.close();
        // The raise's connection was closed when acquire gave up: the pool ends at once,
        // though the row it waited for is still locked.
        const ended = await Promise.race([ownPool.end().then(() => "ended"), delay(5_000)]);
        expect(ended).toBe("ended");
      } finally {
        await blocker.query("COMMIT").catch(() => undefined);
        blocker.release();
      }
      await delay(500); // time for a raise still queued behind the row lock to commit
      expect(await admin.highest(name)).toBe(1n);
    });

    it("a row locked past timeoutMs by a transaction without limits fails the acquire with a message saying so", async () => {
      const name = `blocked-${randomUUID()}`;
      const admin = pgFence(pool);
      await admin.raise(name, 1n);
      const blocker = await pool.connect();
      try {
        await blocker.query("BEGIN");
        await blocker.query("SELECT 1 FROM baton.fence WHERE resource = $1 FOR UPDATE", [name]);
        const c = correctness(5_000, pgFence(pool, { timeoutMs: 1_000 }));
        const error = await c.acquire(name, { waitMs: 20_000 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain("waited 1000 ms for a row lock");
        expect(await c.holder(name)).toBeNull(); // the grant was given back
      } finally {
        await blocker.query("COMMIT").catch(() => undefined);
        blocker.release();
      }
    });
  });
});
