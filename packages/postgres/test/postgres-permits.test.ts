import { randomUUID } from "node:crypto";
import { readPermits, semaphorePermits, track, writePermits } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { type BackendSession, ConfigError, type Grant, PermitLimitError } from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresBackend } from "../src/index.js";

const never = () => new AbortController().signal;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Session = BackendSession &
  Required<Pick<BackendSession, "acquirePermits" | "permitHolders" | "downgrade">>;

/** Polls `check` every 20 ms until it is true; throws after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
}

/** Counts the statements every pg client of this process sends, by prepared name (or text). */
function countStatements(): { readonly names: string[]; stop(): void } {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const names: string[] = [];
  proto.query = function (this: unknown, ...args: unknown[]) {
    const config = args[0] as { name?: unknown; text?: unknown } | string | undefined;
    if (typeof config === "string") names.push(config);
    else if (typeof config?.name === "string") names.push(config.name);
    else if (typeof config?.text === "string") names.push(config.text);
    return original.apply(this, args);
  };
  return {
    names,
    stop: () => {
      proto.query = original;
    },
  };
}

describeBackend("postgres", (url) => {
  describe("postgres permits", () => {
    let admin: pg.Pool;
    let backend: PostgresBackend;
    const sessions: BackendSession[] = [];
    const name = (label: string) => `pg-permits-${randomUUID().slice(0, 8)}/${label}`;
    const open = async (ttlMs = 20_000, ownerId = "owner") => {
      const session = (await backend.openSession({ ttlMs, ownerId })) as Session;
      sessions.push(session);
      return session;
    };
    /** The entry rows of permit key `key` (granted or waiting), in queue order. */
    const rowsOf = async (key: string) =>
      (
        await admin.query(
          "SELECT permits, mode, granted FROM baton.permits WHERE namespace = 'baton' AND name = $1 ORDER BY id",
          [key],
        )
      ).rows as { permits: number; mode: string; granted: boolean }[];
    /** The server process of `session`'s connection (its application name is "baton"). */
    const pidOf = async (ownerId: string) => {
      const { rows } = await admin.query("SELECT pid FROM baton.sessions WHERE owner = $1", [
        ownerId,
      ]);
      return rows[0].pid as number;
    };

    beforeAll(() => {
      admin = new pg.Pool({ connectionString: url, max: 2 });
      admin.on("error", () => undefined);
      backend = new PostgresBackend({ url });
    });
    afterEach(async () => {
      await Promise.allSettled(sessions.splice(0).map((s) => s.close()));
    });
    afterAll(async () => {
      await backend?.close();
      await admin?.end();
    });

    it("declares semaphores for the advisory mode and not for row leases", () => {
      expect(backend.guarantees.semaphores).toBe(true);
      const lease = new PostgresBackend({ url, locks: "lease" });
      expect(lease.guarantees.semaphores).toBe(false);
      void lease.close();
    });

    it("grants up to the limit, then refuses a try and leaves no row behind", async () => {
      const key = name("limit");
      const a = await open(20_000, "a");
      const b = await open(20_000, "b");
      const one = await a.acquirePermits(key, semaphorePermits(3, 2));
      const two = await b.acquirePermits(key, semaphorePermits(3, 1));
      expect(one).not.toBeNull();
      expect(two).not.toBeNull();
      expect(await b.acquirePermits(key, semaphorePermits(3, 1, { wait: false }))).toBeNull();
      expect((await rowsOf(key)).length).toBe(2);
      const holders = await a.permitHolders(key);
      expect(holders.map((h) => [h.ownerId, h.permits, h.mode])).toEqual([
        ["a", 2, "permit"],
        ["b", 1, "permit"],
      ]);
      expect(await a.release(one as Grant)).toBe(true);
      expect(await a.release(one as Grant)).toBe(false);
      expect(await b.release(one as Grant)).toBe(false);
    });

    it("never lets 1-permit requests overtake a waiting 3-permit request", async () => {
      const key = name("queue");
      const a = await open(20_000, "a");
      const b = await open(20_000, "b");
      const c = await open(20_000, "c");
      const held = (await a.acquirePermits(key, semaphorePermits(3, 1))) as Grant;
      const big = track(b.acquirePermits(key, semaphorePermits(3, 3)));
      await until(
        async () => (await rowsOf(key)).length === 2,
        5_000,
        "the 3-permit request queued",
      );
      // Two permits are free, yet a 1-permit request behind the waiting 3 waits, and a try fails.
      const small = track(c.acquirePermits(key, semaphorePermits(3, 1)));
      await until(
        async () => (await rowsOf(key)).length === 3,
        5_000,
        "the 1-permit request queued",
      );
      expect(await c.acquirePermits(key, semaphorePermits(3, 1, { wait: false }))).toBeNull();
      await sleep(300);
      expect(big.settled()).toBe(false);
      expect(small.settled()).toBe(false);
      await a.release(held);
      const bigGrant = (await big.promise) as Grant;
      expect(bigGrant.token).toBeGreaterThan(held.token);
      await sleep(200);
      expect(small.settled()).toBe(false);
      await b.release(bigGrant);
      const smallGrant = (await small.promise) as Grant;
      expect(smallGrant.token).toBeGreaterThan(bigGrant.token);
    });

    it("readers behind a waiting writer wait; a downgrade admits them with the write's token", async () => {
      const key = name("rw");
      const a = await open(20_000, "a");
      const b = await open(20_000, "b");
      const c = await open(20_000, "c");
      const r1 = (await a.acquirePermits(key, readPermits())) as Grant;
      expect(r1.token).toBe(0n);
      const w = track(b.acquirePermits(key, writePermits()));
      await until(async () => (await rowsOf(key)).length === 2, 5_000, "the writer queued");
      const r2 = track(c.acquirePermits(key, readPermits()));
      await until(async () => (await rowsOf(key)).length === 3, 5_000, "the reader queued");
      await sleep(300);
      expect(w.settled()).toBe(false);
      expect(r2.settled()).toBe(false);
      await a.release(r1);
      const wg = (await w.promise) as Grant;
      expect(wg.token).toBeGreaterThan(0n);
      await sleep(200);
      expect(r2.settled()).toBe(false);
      const down = (await b.downgrade(wg)) as Grant;
      expect(down.token).toBe(wg.token);
      const r2g = (await r2.promise) as Grant;
      expect(r2g.token).toBe(wg.token);
      // The write grant is gone: releasing it again does nothing, the read stays.
      expect(await b.release(wg)).toBe(false);
      expect(await b.downgrade(wg)).toBeNull();
      const holders = await a.permitHolders(key);
      expect(holders.map((h) => [h.ownerId, h.mode, h.permits, h.token])).toEqual([
        ["b", "read", 1, wg.token],
        ["c", "read", 1, wg.token],
      ]);
      expect(await b.release(down)).toBe(true);
      expect(await c.release(r2g)).toBe(true);
    });

    it("takes rising tokens, and a read carries the newest write's even after the key was free", async () => {
      const key = name("tokens");
      const s = await open();
      const w1 = (await s.acquirePermits(key, writePermits())) as Grant;
      await s.release(w1);
      const w2 = (await s.acquirePermits(key, writePermits())) as Grant;
      expect(w2.token).toBeGreaterThan(w1.token);
      await s.release(w2);
      expect((await rowsOf(key)).length).toBe(0);
      // Another session, later: the key had no holders in between.
      const t = await open();
      const r = (await t.acquirePermits(key, readPermits())) as Grant;
      expect(r.token).toBe(w2.token);
      await t.release(r);
      const semKey = name("tokens-sem");
      let last = 0n;
      const held: Grant[] = [];
      for (let i = 0; i < 6; i++) {
        const g = (await s.acquirePermits(semKey, semaphorePermits(2))) as Grant;
        expect(g.token).toBeGreaterThan(last);
        last = g.token;
        held.push(g);
        if (held.length === 2) await s.release(held.shift() as Grant);
      }
    });

    it("frees the permits of a session whose connection is killed", async () => {
      const key = name("killed");
      const victim = await open(20_000, "victim");
      const other = await open(2_000, "other");
      await victim.acquirePermits(key, semaphorePermits(2, 1));
      await victim.acquirePermits(key, semaphorePermits(2, 1));
      const waiting = track(other.acquirePermits(key, semaphorePermits(2, 2)));
      await until(async () => (await rowsOf(key)).length === 3, 5_000, "the request queued");
      await admin.query("SELECT pg_terminate_backend($1)", [await pidOf("victim")]);
      // Gone at once from the holders, and granted within the waiter's look (at most TTL / 2).
      await until(
        async () => (await other.permitHolders(key)).every((h) => h.ownerId !== "victim"),
        5_000,
        "the dead session's permits left the holders",
      );
      const grant = (await waiting.promise) as Grant;
      expect(grant).not.toBeNull();
      expect((await rowsOf(key)).map((r) => r.permits)).toEqual([2]);
    });

    it("an aborted wait leaves no row behind", async () => {
      const key = name("abort");
      const a = await open();
      const b = await open();
      const held = (await a.acquirePermits(key, semaphorePermits(1))) as Grant;
      const controller = new AbortController();
      const waiting = track(
        b.acquirePermits(key, semaphorePermits(1, 1, { signal: controller.signal })),
      );
      await until(async () => (await rowsOf(key)).length === 2, 5_000, "the request queued");
      controller.abort(new Error("gave up"));
      await expect(waiting.promise).rejects.toThrow("gave up");
      expect((await rowsOf(key)).length).toBe(1);
      await a.release(held);
      expect((await rowsOf(key)).length).toBe(0);
      // Nothing queued is left to delay the next acquirer.
      const next = await b.acquirePermits(key, semaphorePermits(1, 1, { wait: false }));
      expect(next).not.toBeNull();
    });

    it("rejects another limit while the key has live entries, and takes it once it has none", async () => {
      const key = name("mismatch");
      const a = await open();
      const held = (await a.acquirePermits(key, semaphorePermits(3))) as Grant;
      const error = await a.acquirePermits(key, semaphorePermits(4)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PermitLimitError);
      expect(error).toMatchObject({ stored: 3, requested: 4, field: "permits" });
      expect((await rowsOf(key)).length).toBe(1);
      await a.release(held);
      const again = await a.acquirePermits(key, semaphorePermits(4, 4));
      expect(again).not.toBeNull();
      // A dead session's entries do not keep the old limit.
      const b = await open(20_000, "dead");
      const key2 = name("mismatch-dead");
      await b.acquirePermits(key2, semaphorePermits(2));
      await admin.query("SELECT pg_terminate_backend($1)", [await pidOf("dead")]);
      await until(async () => b.lost?.aborted === true, 5_000, "the session's loss seen");
      expect(await a.acquirePermits(key2, semaphorePermits(5, 5))).not.toBeNull();
    });

    it("keeps 10,000 permits of one session with one statement per renewal", async () => {
      const key = name("many");
      const s = await open(20_000, "many");
      const grants: Grant[] = [];
      for (let i = 0; i < 10_000; i++) {
        grants.push((await s.acquirePermits(key, semaphorePermits(1_000_000))) as Grant);
      }
      const count = countStatements();
      try {
        await s.keepAlive();
        await s.keepAlive();
      } finally {
        count.stop();
      }
      expect(count.names.length).toBe(2);
      expect((await s.permitHolders(key)).length).toBe(10_000);
      const other = await open(20_000, "other");
      // Another session still gets the rest, at once.
      expect(
        await other.acquirePermits(key, semaphorePermits(1_000_000, 990_000, { wait: false })),
      ).not.toBeNull();
      expect(
        await other.acquirePermits(key, semaphorePermits(1_000_000, 1, { wait: false })),
      ).toBeNull();
      await s.close();
      expect((await rowsOf(key)).length).toBe(1);
    }, 120_000);

    it("without the permit tables (migrate: false), locks work and permits say to run migrate()", async () => {
      const schema = `baton_permits_${randomUUID().slice(0, 8)}`;
      await migrate(admin, { schema });
      await admin.query(`DROP TABLE ${schema}.permits`);
      const own = new PostgresBackend({ url, schema, migrate: false });
      try {
        const s = (await own.openSession({ ttlMs: 20_000, ownerId: "old" })) as Session;
        const lock = await s.acquire(name("lock"), { wait: false, signal: never() });
        expect(lock).not.toBeNull();
        const error = await s
          .acquirePermits(name("sem"), semaphorePermits(2))
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).message).toContain("migrate()");
      } finally {
        await own.close();
        await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      }
    });

    it("a session's close hands its permits to the waiters at once", async () => {
      const key = name("close");
      const a = await open(60_000, "a");
      const b = await open(60_000, "b");
      await a.acquirePermits(key, semaphorePermits(1));
      const waiting = track(b.acquirePermits(key, semaphorePermits(1)));
      await until(async () => (await rowsOf(key)).length === 2, 5_000, "the request queued");
      await a.close();
      // Well before the waiter's own look (a quarter of its TTL at least: 15 s).
      const grant = await Promise.race([waiting.promise, sleep(5_000).then(() => "late")]);
      expect(grant).not.toBe("late");
    });
  });
});
