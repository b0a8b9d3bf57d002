import { randomUUID } from "node:crypto";
import { type LockWorker, spawnLockWorker } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock, LockTimeoutError } from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { advisoryKey, PostgresBackend } from "../src/index.js";
import { queueKey } from "../src/postgres-keys.js";
import { QUEUE_LEAVE, QUEUE_WAIT } from "../src/statements.js";
import { queuedRequests } from "./queued-requests.js";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Counts the statements this process sends whose first argument `counts` accepts. */
function countQueries(counts: (first: unknown) => boolean): {
  readonly count: number;
  stop(): void;
} {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let count = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    if (counts(args[0])) count++;
    return original.apply(this, args);
  };
  return {
    get count() {
      return count;
    },
    stop: () => {
      proto.query = original;
    },
  };
}

/** Counts the acquire statements (named `baton_acquire_*`, `baton_wait_acquire_*`) sent. */
function countAcquires(): { readonly count: number; stop(): void } {
  return countQueries((first) => {
    const name = (first as { name?: unknown } | undefined)?.name;
    return typeof name === "string" && /^baton_(wait_)?acquire_/.test(name);
  });
}

/** Counts the cancels of running statements (`pg_cancel_backend`) this process sends. */
function countCancels(): { readonly count: number; stop(): void } {
  return countQueries((first) => {
    const text =
      typeof first === "string" ? first : (first as { text?: unknown } | undefined)?.text;
    return typeof text === "string" && text.includes("pg_cancel_backend");
  });
}

/** Polls `check` every 20 ms until it is true; throws after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await delay(20);
  }
}

describeBackend("postgres", (url) => {
  describe("postgres waits", () => {
    let admin: pg.Pool;
    let backend: PostgresBackend;
    const coordinators: Coordinator[] = [];
    const backends: PostgresBackend[] = [];
    const workers: LockWorker[] = [];
    /** A coordinator on a backend of its own (as if in a process of its own). */
    const separate = (ttlMs: number) => {
      const own = new PostgresBackend({ url });
      backends.push(own);
      const c = createCoordinator({ backend: own, ttlMs });
      coordinators.push(c);
      return c;
    };
    /** Lock requests on lock `name` that wait in the server (not granted). */
    const waitingOn = (name: string) => queuedRequests(admin, advisoryKey("baton", name));
    const coordinator = () => {
      const c = createCoordinator({ backend, closeBackend: false, ttlMs: 5_000 });
      coordinators.push(c);
      return c;
    };

    beforeAll(() => {
      admin = new pg.Pool({ connectionString: url, max: 2 });
      admin.on("error", () => undefined);
      backend = new PostgresBackend({ url });
    });
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
      await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
      await Promise.allSettled(backends.splice(0).map((b) => b.close()));
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
      const holder = createCoordinator({ backend, closeBackend: false, ttlMs: 20_000 });
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

    it("waiters of separate processes are served in arrival order, and a release makes nobody try again", async () => {
      const name = `fifo-${randomUUID()}`;
      const holder = separate(20_000);
      const first = await holder.acquire(name);
      const order: number[] = [];
      const waiters: Promise<void>[] = [];
      for (let i = 0; i < 4; i++) {
        const c = separate(20_000); // renewals (every TTL/3) stay out of the way
        waiters.push(
          c.withLock(
            name,
            async () => {
              order.push(i);
              await delay(30);
            },
            { waitMs: 10_000 },
          ),
        );
        await until(async () => (await waitingOn(name)) === i + 1, 5_000, `waiter ${i} queued`);
      }
      const acquires = countAcquires();
      try {
        await first.release();
        await Promise.all(waiters);
      } finally {
        acquires.stop();
      }
      expect(order).toEqual([0, 1, 2, 3]);
      // Each waiter's one waiting statement was sent before the releases: none was woken to
      // try again (with woken waiters racing, every release made each remaining one try).
      expect(acquires.count).toBe(0);
    });

    it("a session that lately found a lock held waits for it with one statement, and still gets it at once when free", async () => {
      const name = `contended-${randomUUID()}`;
      const a = separate(20_000);
      const b = separate(20_000);
      /** b's acquire while a holds the lock: its acquire statements until it waits in the server. */
      const contendedAcquire = async () => {
        const held = await a.acquire(name);
        const acquires = countAcquires();
        let lock: Promise<Lock>;
        try {
          lock = b.acquire(name, { waitMs: 10_000 });
          await until(async () => (await waitingOn(name)) === 1, 5_000, "b queued");
        } finally {
          acquires.stop();
        }
        await held.release();
        await (await lock).release();
        return acquires.count;
      };
      // The first time b tries, is refused, then waits; from then on it waits at once.
      expect(await contendedAcquire()).toBe(2);
      expect(await contendedAcquire()).toBe(1);
      expect(await contendedAcquire()).toBe(1);
      // Free now: the wait is granted at once.
      const acquires = countAcquires();
      try {
        const free = await b.acquire(name, { waitMs: 10_000 });
        expect(free.token).toBeGreaterThan(0n);
        await free.release();
      } finally {
        acquires.stop();
      }
      expect(acquires.count).toBe(1);
      expect(await waitingOn(name)).toBe(0);
    });

    it("a session waiting for a lock still renews, releases and takes other locks at once", async () => {
      const ttlMs = 1_000; // a renewal every 333 ms interrupts the wait
      const c = separate(ttlMs);
      const failures: unknown[] = [];
      c.on("renewFailed", (e) => failures.push(e.error));
      c.on("lost", (e) => failures.push(e.error));
      c.on("backgroundError", (e) => failures.push(e.error));
      const wanted = `wanted-${randomUUID()}`;
      const holder = separate(20_000);
      const held = await holder.acquire(wanted);
      const mine = await c.acquire(`mine-${randomUUID()}`);
      const waiting = c.acquire(wanted, { waitMs: 20_000 });
      await until(async () => (await waitingOn(wanted)) === 1, 5_000, "queued");
      const started = performance.now();
      let slowest = 0;
      while (performance.now() - started < 2_500) {
        const t = performance.now();
        const other = await c.acquire(`other-${randomUUID()}`, { waitMs: 0 });
        await other.release();
        slowest = Math.max(slowest, performance.now() - t);
      }
      const t = performance.now();
      expect(await mine.release()).toBe(true);
      slowest = Math.max(slowest, performance.now() - t);
      expect(slowest).toBeLessThan(ttlMs / 2);
      const releasedAt = performance.now();
      await held.release();
      const lock = await waiting;
      expect(performance.now() - releasedAt).toBeLessThan(1_000);
      expect(lock.held).toBe(true);
      await lock.release();
      expect(failures).toEqual([]);
    });

    it("a caller waiting for a held lock leaves its session's connection to the other callers, and still gets the lock", async () => {
      const name = `held-${randomUUID()}`;
      const holder = separate(20_000);
      const held = await holder.acquire(name);
      const c = separate(20_000);
      const waiting = c.acquire(name, { waitMs: 20_000 });
      await until(async () => (await waitingOn(name)) === 1, 5_000, "queued");
      const cancels = countCancels();
      let locks = 0;
      try {
        // Four callers take and release free locks on the same session for a second, with
        // pauses between, when nothing else uses the connection.
        const started = performance.now();
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            while (performance.now() - started < 1_000) {
              const lock = await c.acquire(`free-${randomUUID()}`, { waitMs: 0 });
              await lock.release();
              locks++;
              await delay(10);
            }
          }),
        );
      } finally {
        cancels.stop();
      }
      expect(locks).toBeGreaterThan(4);
      // The first statement that needs the connection moves the wait off it (its cancel may be
      // sent again until it lands): the wait is not cancelled and sent again for every one.
      expect(cancels.count).toBeLessThanOrEqual(3);
      const releasedAt = performance.now();
      await held.release();
      const lock = await waiting;
      expect(performance.now() - releasedAt).toBeLessThan(5_000);
      expect(lock.token).toBeGreaterThan(held.token);
      await lock.release();
    });

    it("an aborted wait leaves no lock held or requested in the server, and the next waiter gets it", async () => {
      const name = `abort-${randomUUID()}`;
      const holder = separate(20_000);
      const held = await holder.acquire(name);
      const quitter = separate(20_000);
      const controller = new AbortController();
      const aborted = quitter
        .acquire(name, { signal: controller.signal, waitMs: 20_000 })
        .catch((e: unknown) => e);
      await until(async () => (await waitingOn(name)) === 1, 5_000, "queued");
      controller.abort(new Error("gave up"));
      expect(await aborted).toMatchObject({ message: "gave up" });
      // The coordinator rejects at once; the cancel lands in the server a moment later.
      await until(async () => (await waitingOn(name)) === 0, 2_000, "the wait cancelled");
      const next = separate(20_000);
      const waiting = next.acquire(name, { waitMs: 5_000 });
      await until(async () => (await waitingOn(name)) === 1, 5_000, "next queued");
      await held.release();
      await (await waiting).release();
      const { rows } = await admin.query(
        `SELECT count(*)::int AS n FROM pg_locks l WHERE l.locktype = 'advisory'
           AND l.classid = (($1::bigint >> 32) & 4294967295)::oid
           AND l.objid = ($1::bigint & 4294967295)::oid`,
        [advisoryKey("baton", name).toString()],
      );
      expect(rows[0].n).toBe(0);
    });

    it("a frozen waiter (SIGSTOP) keeps a freed lock from the others for a TTL at most", async () => {
      const ttlMs = 2_000;
      const name = `frozen-waiter-${randomUUID()}`;
      const holder = separate(20_000);
      const held = await holder.acquire(name);
      const worker = await spawnLockWorker({ url, ttlMs, ownerId: "frozen-waiter" });
      workers.push(worker);
      worker.send({ op: "acquire", name, waitMs: 60_000 });
      await until(async () => (await waitingOn(name)) === 1, 10_000, "worker queued");
      worker.pause();
      const next = separate(ttlMs);
      const waiting = next.acquire(name, { waitMs: ttlMs * 4 + 5_000 });
      await until(async () => (await waitingOn(name)) >= 1, 5_000, "next queued");
      const releasedAt = performance.now();
      await held.release();
      const lock = await waiting;
      expect(performance.now() - releasedAt).toBeLessThan(ttlMs + 3_000);
      expect(lock.held).toBe(true);
      await lock.release();
    });

    it("a queue key held elsewhere forever delays a waiter that waits on a waiter connection by a bound only", async () => {
      const ttlMs = 2_000;
      const first = `first-${randomUUID()}`;
      const second = `second-${randomUUID()}`;
      const holder = separate(20_000);
      const heldFirst = await holder.acquire(first);
      const heldSecond = await holder.acquire(second);
      // Something else holds the second lock's queue key, and never lets go.
      const stranger = await admin.connect();
      try {
        const [high, low] = queueKey(advisoryKey("baton", second));
        await stranger.query("SELECT pg_advisory_lock($1::int, $2::int)", [high, low]);
        const c = separate(ttlMs);
        // Its connection waits for the first lock, so it waits for the second on a waiter
        // connection, whose turn comes through the (blocked) queue key.
        const waitingFirst = c.acquire(first, { waitMs: 30_000 });
        await until(async () => (await waitingOn(first)) === 1, 5_000, "first queued");
        const waitingSecond = c.acquire(second, { waitMs: 30_000 });
        await until(
          async () => {
            const { rows } = await admin.query(
              `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
               WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND NOT l.granted
                 AND a.application_name = 'baton-waiter'`,
            );
            return rows[0].n > 0;
          },
          5_000,
          "a waiter connection queued for the queue key",
        );
        const releasedAt = performance.now();
        await heldSecond.release();
        const lock = await waitingSecond;
        expect(performance.now() - releasedAt).toBeLessThan(ttlMs + 3_000);
        await lock.release();
        await heldFirst.release();
        await (await waitingFirst).release();
      } finally {
        stranger.release(true);
      }
    });

    it("two sessions waiting for each other's locks both run out of time, as with any lock", async () => {
      const a = `cycle-a-${randomUUID()}`;
      const b = `cycle-b-${randomUUID()}`;
      const one = separate(20_000);
      const two = separate(20_000);
      const heldA = await one.acquire(a);
      const heldB = await two.acquire(b);
      // PostgreSQL's deadlock detector (after deadlock_timeout, 1 s) fails one of the two waits;
      // that wait is sent again, so both end as waits that ran out.
      const started = performance.now();
      const outcomes = await Promise.all([
        one.acquire(b, { waitMs: 2_500 }).catch((e: unknown) => e),
        two.acquire(a, { waitMs: 2_500 }).catch((e: unknown) => e),
      ]);
      expect(outcomes[0]).toBeInstanceOf(LockTimeoutError);
      expect(outcomes[1]).toBeInstanceOf(LockTimeoutError);
      expect(performance.now() - started).toBeLessThan(2_500 + 2_000);
      await heldA.release();
      await heldB.release();
    });

    it("a waiter connection that takes its turn again holds the queue key once, and leaves it", async () => {
      const key = advisoryKey("baton", `turns-${randomUUID()}`);
      const [high, low] = queueKey(key);
      const client = await admin.connect();
      try {
        for (let i = 0; i < 3; i++) {
          await client.query({
            ...QUEUE_WAIT,
            values: [high, low, key.toString(), "1000", "5000"],
          });
        }
        // Held once: one unlock frees it (a second finds nothing to unlock).
        const unlock = "SELECT pg_advisory_unlock($1::int, $2::int) AS unlocked";
        expect((await client.query(unlock, [high, low])).rows[0].unlocked).toBe(true);
        expect((await client.query(unlock, [high, low])).rows[0].unlocked).toBe(false);
        await client.query({ ...QUEUE_WAIT, values: [high, low, key.toString(), "1000", "5000"] });
        await client.query(QUEUE_LEAVE);
        expect((await client.query(unlock, [high, low])).rows[0].unlocked).toBe(false);
        const { rows } = await client.query("SHOW idle_session_timeout");
        expect(rows[0].idle_session_timeout).toBe("0");
      } finally {
        client.release(true);
      }
    });
  });
});
