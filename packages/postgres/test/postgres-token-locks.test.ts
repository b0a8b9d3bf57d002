import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import type { BackendSession, Grant } from "@baton/core";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Connections } from "../src/connections.js";
import { advisoryKey, migrate } from "../src/index.js";
import { KeyWaits } from "../src/key-waits.js";
import { queueKey, schemaNames, type TokenTag, tokenTag } from "../src/postgres-keys.js";
import { PostgresSession, type PostgresSessionContext } from "../src/postgres-session.js";
import {
  inspectionStatements,
  type Statement,
  type Statements,
  statements,
} from "../src/statements.js";
import { MAX_TOKEN_LOCKS } from "../src/token-locks.js";
import { WaiterPool } from "../src/waiter-pool.js";
import { queuedRequests } from "./queued-requests.js";

interface AdvisoryLock {
  objsubid: number;
  mode: string;
  classid: string;
  objid: string;
}

const signal = new AbortController().signal;
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TRY = { wait: false, signal } as const;

/** A statement that fails after running `inner` (whose locks stay taken). */
function failingAfter(inner: Statement): Statement {
  return {
    name: `${inner.name}_then_fail`,
    text: `WITH x AS MATERIALIZED (${inner.text}) SELECT x.*, 1 / ((x.token IS NOT NULL)::int * 0) AS boom FROM x`,
  };
}

/** A statement of `params` parameters that fails without doing anything. */
function failing(params: number): Statement {
  const list = Array.from({ length: params }, (_, i) => `$${i + 1}::text`).join(", ");
  return { name: `baton_test_fail_${params}`, text: `SELECT 1 / 0 AS boom, ${list}` };
}

/** Polls `check` every 20 ms until it is true; throws after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await delay(20);
  }
}

describe("token-lock tags and queue keys (no I/O)", () => {
  it("a tag is a non-negative int4 (the key's low 31 bits), stable per key", () => {
    for (const name of ["a", "b", "invoices", "x".repeat(300)]) {
      const key = advisoryKey("baton", name);
      const tag = tokenTag(key);
      expect(tokenTag(key)).toBe(tag);
      expect(Number.isInteger(tag)).toBe(true);
      expect(tag).toBeGreaterThanOrEqual(0);
      expect(tag).toBeLessThan(2 ** 31);
    }
    expect(tokenTag(-1n)).toBe(2 ** 31 - 1);
    expect(tokenTag(0n)).toBe(0);
    expect(tokenTag(2n ** 31n + 5n)).toBe(5);
  });

  it("a queue key's first half is negative, so it is never a token lock (whose tag is not)", () => {
    for (const key of [0n, 1n, -1n, 2n ** 62n, -(2n ** 63n), 2n ** 63n - 1n, 0x7fffffffn << 32n]) {
      const [high, low] = queueKey(key);
      expect(high).toBeLessThan(0);
      expect(high).toBeGreaterThanOrEqual(-(2 ** 31));
      expect(low).toBe(Number(BigInt.asIntN(32, key)));
      // The rest of the first half is the key's.
      expect(BigInt(high) & 0x7fffffffn).toBe((key >> 32n) & 0x7fffffffn);
    }
  });
});

describeBackend("postgres", (url) => {
  describe("postgres token locks", () => {
    let admin: pg.Pool;
    const sessions: BackendSession[] = [];
    const pools: WaiterPool[] = [];
    const strangers: pg.PoolClient[] = [];

    /** A session on a connection named `app`, with `overrides` of its backend context. */
    const open = async (
      app: string,
      overrides: Partial<PostgresSessionContext> = {},
      ownerId = app,
    ): Promise<BackendSession> => {
      const connection = { connectionString: url, application_name: app };
      const cancel = async (pid: number) => {
        await admin.query("SELECT pg_cancel_backend($1)", [pid]);
      };
      const connections = new Connections();
      const waiters = new WaiterPool(connection, connections, cancel);
      pools.push(waiters);
      const context: PostgresSessionContext = {
        connection,
        connections,
        namespace: "baton",
        quotedSchema: '"baton"',
        statements: statements(schemaNames('"baton"')),
        waits: new KeyWaits(waiters),
        waiters,
        cancel,
        tag: tokenTag,
        sessionTtl: () => true,
        inspection: inspectionStatements(schemaNames('"baton"')),
        operations: () => true,
        ...overrides,
      };
      const session = await PostgresSession.open(context, ownerId, 10_000, undefined);
      sessions.push(session);
      return session;
    };
    /**
     * The advisory locks held by connections named `app`; a token lock's `objid` is listed as
     * the token it holds (its offset plus the token sequence's start).
     */
    const locksOf = async (app: string): Promise<AdvisoryLock[]> => {
      const { rows } = await admin.query(
        `SELECT l.objsubid::int AS objsubid, l.mode, l.classid::text AS classid,
           CASE WHEN l.objsubid = 2 THEN (l.objid::bigint + (SELECT s.start_value FROM pg_sequences s
             WHERE s.schemaname = 'baton' AND s.sequencename = 'token_seq'))::text
           ELSE l.objid::text END AS objid
         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1
         ORDER BY l.objsubid, l.objid`,
        [app],
      );
      return rows as AdvisoryLock[];
    };
    /** The token lock a grant with `token` and `tag` holds (as locksOf lists it). */
    const tokenLocks = (token: bigint, tag: TokenTag): AdvisoryLock[] => [
      { objsubid: 2, mode: "ShareLock", classid: String(tag), objid: String(token) },
    ];
    const keyLock = (key: bigint): AdvisoryLock => ({
      objsubid: 1,
      mode: "ExclusiveLock",
      classid: String(BigInt.asUintN(64, key) >> 32n),
      objid: String(BigInt.asUintN(32, key)),
    });
    /** Requests for lock `key` waiting in the server. */
    const waitingOn = (key: bigint) => queuedRequests(admin, key);
    const rowsOf = async (name: string) => {
      const { rows } = await admin.query(
        "SELECT token::text AS token, value FROM baton.holders WHERE key = $1",
        [advisoryKey("baton", name).toString()],
      );
      return rows as { token: string; value: string | null }[];
    };
    /** A connection of its own, outside Baton. */
    const stranger = async () => {
      const client = await admin.connect();
      strangers.push(client);
      return client;
    };
    const granted = (grant: Grant | null): Grant => {
      expect(grant).not.toBeNull();
      return grant as Grant;
    };

    beforeAll(async () => {
      admin = new pg.Pool({ connectionString: url, max: 4 });
      admin.on("error", () => undefined);
      await migrate(admin);
    });
    afterEach(async () => {
      for (const client of strangers.splice(0)) client.release(true);
      await Promise.allSettled(sessions.splice(0).map((s) => s.close()));
      await Promise.allSettled(pools.splice(0).map((p) => p.close()));
    });
    afterAll(async () => {
      await admin?.end();
    });

    it("a grant without a value writes no row: holder() reads its token from the token lock, and a release leaves nothing", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const name = `plain-${randomUUID()}`;
      const key = advisoryKey("baton", name);
      const session = await open(app, {}, "owner-plain");
      const observer = await open(`${app}-obs`);
      const grant = granted(await session.acquire(name, TRY));
      expect(await rowsOf(name)).toEqual([]);
      expect(await locksOf(app)).toEqual([keyLock(key), ...tokenLocks(grant.token, tokenTag(key))]);
      expect(await observer.holder(name)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-plain",
        token: grant.token,
      });
      expect(await session.holder(name)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-plain",
        token: grant.token,
      });
      // A renewal sees it held, and keeps it.
      expect(await session.keepAlive()).toBeUndefined();
      expect(await session.release(grant)).toBe(true);
      expect(await locksOf(app)).toEqual([]);
      expect(await observer.holder(name)).toBeNull();
    });

    it("a grant with a value keeps its holder row, and takes no token lock", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const name = `valued-${randomUUID()}`;
      const session = await open(app, {}, "owner-valued");
      const observer = await open(`${app}-obs`);
      const grant = granted(await session.acquire(name, { ...TRY, value: "node-a" }));
      expect(await rowsOf(name)).toEqual([{ token: grant.token.toString(), value: "node-a" }]);
      expect(await locksOf(app)).toEqual([keyLock(advisoryKey("baton", name))]);
      expect(await observer.holder(name)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-valued",
        token: grant.token,
        value: "node-a",
      });
      expect(await session.release(grant)).toBe(true);
      expect(await locksOf(app)).toEqual([]);
      expect(await observer.holder(name)).toBeNull();
      // The next renewal deletes the row.
      await session.keepAlive();
      expect(await rowsOf(name)).toEqual([]);
    });

    it("keys of one session whose tags clash: the later ones are recorded in rows, and holder() is right for each", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const same: PostgresSessionContext["tag"] = () => 1_000_000;
      const session = await open(app, { tag: same }, "owner-clash");
      const observer = await open(`${app}-obs`, { tag: same });
      const [one, two, three] = ["one", "two", "three"].map((n) => `clash-${n}-${randomUUID()}`);
      const g1 = granted(await session.acquire(one as string, TRY));
      const g2 = granted(await session.acquire(two as string, TRY));
      expect(g2.token).toBeGreaterThan(g1.token);
      expect(await rowsOf(one as string)).toEqual([]);
      expect(await rowsOf(two as string)).toEqual([{ token: g2.token.toString(), value: null }]);
      // One token lock: the first key's.
      const held = await locksOf(app);
      expect(held.filter((l) => l.objsubid === 2)).toEqual(tokenLocks(g1.token, same(0n)));
      expect(await observer.holder(one as string)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-clash",
        token: g1.token,
      });
      expect(await observer.holder(two as string)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-clash",
        token: g2.token,
      });
      // The first released, the second (a row) still uses the tag: a third key takes a row.
      expect(await session.release(g1)).toBe(true);
      const g3 = granted(await session.acquire(three as string, TRY));
      expect(await rowsOf(three as string)).toEqual([{ token: g3.token.toString(), value: null }]);
      expect((await locksOf(app)).filter((l) => l.objsubid === 2)).toEqual([]);
      expect(await observer.holder(two as string)).toMatchObject({ token: g2.token });
      expect(await observer.holder(three as string)).toMatchObject({ token: g3.token });
      // Another session may use the same tag at the same time: token locks are per connection.
      const other = await open(`${app}-other`, { tag: same }, "owner-other");
      const g4 = granted(await other.acquire(one as string, TRY));
      expect(await rowsOf(one as string)).toEqual([]);
      expect(await observer.holder(one as string)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-other",
        token: g4.token,
      });
      expect(await observer.holder(two as string)).toMatchObject({ token: g2.token });
      for (const [s, g] of [
        [session, g2],
        [session, g3],
        [other, g4],
      ] as const) {
        expect(await s.release(g)).toBe(true);
      }
      expect(await locksOf(app)).toEqual([]);
      expect(await locksOf(`${app}-other`)).toEqual([]);
      // Once nothing uses the tag, a key takes a token lock again.
      const g5 = granted(await session.acquire(three as string, TRY));
      expect((await locksOf(app)).filter((l) => l.objsubid === 2)).toEqual(
        tokenLocks(g5.token, same(0n)),
      );
      expect(await observer.holder(three as string)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-clash",
        token: g5.token,
      });
      expect(await session.release(g5)).toBe(true);
    });

    it("two real names whose tags clash: the second held at the same time takes a row", async () => {
      // A fixed list of names, so the search (a birthday collision of 31-bit tags) is the same
      // on every run.
      const seen = new Map<number, string>();
      let pair: [string, string] | undefined;
      for (let i = 0; pair === undefined && i < 300_000; i++) {
        const name = `tag-clash-${i}`;
        const tag = tokenTag(advisoryKey("baton", name));
        const before = seen.get(tag);
        if (before !== undefined) pair = [before, name];
        else seen.set(tag, name);
      }
      if (pair === undefined) throw new Error("no clash among the names searched");
      const [first, second] = pair;
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const session = await open(app, {}, "owner-real");
      const observer = await open(`${app}-obs`);
      // The names are fixed: free them from an earlier run's leftovers (rows only).
      await admin.query("DELETE FROM baton.holders WHERE key = ANY($1::bigint[])", [
        [advisoryKey("baton", first).toString(), advisoryKey("baton", second).toString()],
      ]);
      const g1 = granted(await session.acquire(first, TRY));
      const g2 = granted(await session.acquire(second, TRY));
      expect(await rowsOf(first)).toEqual([]);
      expect(await rowsOf(second)).toEqual([{ token: g2.token.toString(), value: null }]);
      expect(await observer.holder(first)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-real",
        token: g1.token,
      });
      expect(await observer.holder(second)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-real",
        token: g2.token,
      });
      expect(await session.release(g2)).toBe(true);
      expect(await session.release(g1)).toBe(true);
      expect(await locksOf(app)).toEqual([]);
    });

    it("a token lock held exclusively elsewhere: the grant is recorded in a row instead, nothing leaks", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const name = `foreign-${randomUUID()}`;
      const key = advisoryKey("baton", name);
      const tag = tokenTag(key);
      const session = await open(app, {}, "owner-foreign");
      const observer = await open(`${app}-obs`);
      const rival = await open(`${app}-rival`);
      const other = await stranger();
      let last = 0n;
      // The token locks of the next thousand tokens, held exclusively by a connection outside
      // Baton (tokens taken meanwhile by other tests can push a grant past the range: then
      // again). Once through a try, once through a wait: the rival holds the lock, this
      // session waits in the server, and gets it at the rival's release.
      for (const how of ["try", "wait"] as const) {
        let fellBack = false;
        for (let attempt = 0; attempt < 5 && !fellBack; attempt++) {
          const blocker = how === "wait" ? granted(await rival.acquire(name, TRY)) : undefined;
          const { rows } = await admin.query(
            `SELECT last_value::text AS v, start_value::text AS base FROM pg_sequences
            WHERE schemaname = 'baton' AND sequencename = 'token_seq'`,
          );
          const from = BigInt(rows[0].v as string) + 1n;
          // A token lock holds the token's offset from the sequence's start.
          const base = BigInt(rows[0].base as string);
          await other.query(
            "SELECT count(pg_advisory_lock($3::int, (g - $4::bigint)::int)) FROM generate_series($1::bigint, $2::bigint) g",
            [from.toString(), (from + 999n).toString(), tag, base.toString()],
          );
          let grant: Grant;
          if (blocker === undefined) grant = granted(await session.acquire(name, TRY));
          else {
            const waiting = session.acquire(name, { wait: true, signal });
            await until(async () => (await waitingOn(key)) === 1, 5_000, "the wait queued");
            expect(await rival.release(blocker)).toBe(true);
            grant = granted(await waiting);
          }
          expect(grant.token).toBeGreaterThan(last);
          last = grant.token;
          fellBack = grant.token <= from + 999n;
          if (fellBack) {
            expect(await rowsOf(name)).toEqual([{ token: grant.token.toString(), value: null }]);
            expect(await locksOf(app)).toEqual([keyLock(key)]);
            expect(await observer.holder(name)).toEqual({
              remainingMs: expect.any(Number),
              ownerId: "owner-foreign",
              token: grant.token,
            });
          }
          expect(await session.release(grant)).toBe(true);
          expect(await locksOf(app)).toEqual([]);
          await other.query("SELECT pg_advisory_unlock_all()");
          await session.keepAlive(); // row GC
        }
        expect(fellBack).toBe(true);
      }
    });

    it("a session takes token locks for at most MAX_TOKEN_LOCKS keys at once; the rest are recorded in rows", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const session = await open(app, {}, "owner-many");
      const observer = await open(`${app}-obs`);
      const names = Array.from(
        { length: MAX_TOKEN_LOCKS + 3 },
        (_, i) => `many-${i}-${randomUUID()}`,
      );
      const grants: Grant[] = [];
      for (const name of names) grants.push(granted(await session.acquire(name, TRY)));
      const held = await locksOf(app);
      // Tags of random names clash rarely (31 bits); a clash would take a row as well.
      const tokenLocked = held.filter((l) => l.objsubid === 2).length;
      expect(tokenLocked).toBeLessThanOrEqual(MAX_TOKEN_LOCKS);
      expect(tokenLocked).toBeGreaterThanOrEqual(MAX_TOKEN_LOCKS - 2);
      expect(held.filter((l) => l.objsubid === 1)).toHaveLength(names.length);
      const lastName = names.at(-1) as string;
      const lastGrant = grants.at(-1) as Grant;
      expect(await rowsOf(lastName)).toEqual([{ token: lastGrant.token.toString(), value: null }]);
      for (const [i, name] of names.entries()) {
        expect(await observer.holder(name)).toEqual({
          remainingMs: expect.any(Number),
          ownerId: "owner-many",
          token: (grants[i] as Grant).token,
        });
      }
      for (const g of grants) expect(await session.release(g)).toBe(true);
      expect(await locksOf(app)).toEqual([]);
      // With fewer held, token locks again.
      const again = granted(await session.acquire(lastName, TRY));
      expect(await locksOf(app)).toEqual([
        keyLock(advisoryKey("baton", lastName)),
        ...tokenLocks(again.token, tokenTag(advisoryKey("baton", lastName))),
      ]);
      expect(await session.release(again)).toBe(true);
    });

    it("a waiting acquire takes a token lock too, and tokens rise across both ways of keeping them", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const name = `mixed-${randomUUID()}`;
      const key = advisoryKey("baton", name);
      const session = await open(app, {}, "owner-mixed");
      const rival = await open(`${app}-rival`);
      const observer = await open(`${app}-obs`);
      let last = 0n;
      for (let i = 0; i < 6; i++) {
        // Held by the rival: this session waits in the server, then gets it at the release.
        const blocker = granted(await rival.acquire(name, TRY));
        expect(blocker.token).toBeGreaterThan(last);
        const value = i % 2 === 0 ? undefined : `v${i}`;
        const waiting = session.acquire(name, { wait: true, signal, ...(value ? { value } : {}) });
        await until(async () => (await waitingOn(key)) === 1, 5_000, "the wait queued");
        expect(await rival.release(blocker)).toBe(true);
        const grant = granted(await waiting);
        expect(grant.token).toBeGreaterThan(blocker.token);
        last = grant.token;
        const expected = value === undefined ? [] : [{ token: grant.token.toString(), value }];
        expect(await rowsOf(name)).toEqual(expected);
        const tokens = value === undefined ? tokenLocks(grant.token, tokenTag(key)) : [];
        expect(await locksOf(app)).toEqual([keyLock(key), ...tokens]);
        expect(await observer.holder(name)).toEqual({
          remainingMs: expect.any(Number),
          ownerId: "owner-mixed",
          token: grant.token,
          ...(value ? { value } : {}),
        });
        expect(await session.release(grant)).toBe(true);
        expect(await locksOf(app)).toEqual([]);
        // Row GC by the renewals.
        await session.keepAlive();
        await rival.keepAlive();
      }
    });

    it("a failed acquire gives back the lock with its token lock", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const name = `fail-${randomUUID()}`;
      const real = statements(schemaNames('"baton"'));
      const broken: Statements = {
        ...real,
        acquireTokenKept: failingAfter(real.acquireTokenKept),
        waitAcquireTokenKept: failingAfter(real.waitAcquireTokenKept),
      };
      const session = await open(app, { statements: broken });
      const tried = await session.acquire(name, TRY).catch((e: unknown) => e);
      expect(tried).toBeInstanceOf(Error);
      expect(await locksOf(app)).toEqual([]);
      const waited = await session.acquire(name, { wait: true, signal }).catch((e: unknown) => e);
      expect(waited).toBeInstanceOf(Error);
      expect(await locksOf(app)).toEqual([]);
      // With a value it is the row statement, which works.
      const grant = granted(await session.acquire(name, { ...TRY, value: "x" }));
      expect(await session.release(grant)).toBe(true);
      expect(await locksOf(app)).toEqual([]);
    });

    it("a give-back or a release that fails leaves an orphan: the next renewal, or the next acquire of its key, unlocks it with its token lock", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const [first, second] = [`orphan-a-${randomUUID()}`, `orphan-b-${randomUUID()}`];
      const real = statements(schemaNames('"baton"'));
      let failAcquire = false;
      let failUnlock = false;
      let failRelease = false;
      // Read on every use: each switch breaks one statement until it is turned off.
      const switched = {
        ...real,
        get acquireTokenKept() {
          return failAcquire ? failingAfter(real.acquireTokenKept) : real.acquireTokenKept;
        },
        get unlockHeld() {
          return failUnlock ? failing(2) : real.unlockHeld;
        },
        get releaseTokenKept() {
          return failRelease ? failing(3) : real.releaseTokenKept;
        },
      } as Statements;
      const session = await open(app, { statements: switched }, "owner-orphan");
      const observer = await open(`${app}-obs`);
      const key = advisoryKey("baton", first);

      // 1. The acquire fails after taking everything, and so does its give-back.
      failAcquire = true;
      failUnlock = true;
      expect(await session.acquire(first, TRY).catch((e: unknown) => e)).toBeInstanceOf(Error);
      failAcquire = false;
      failUnlock = false;
      const orphaned = await locksOf(app);
      expect(orphaned).toHaveLength(2);
      expect(orphaned[0]).toEqual(keyLock(key));
      // The orphan's tag is in use: another key sharing it would take a row (see above).
      // The next acquire of the key unlocks the orphan first, then takes it afresh.
      const g1 = granted(await session.acquire(first, TRY));
      expect(await locksOf(app)).toEqual([keyLock(key), ...tokenLocks(g1.token, tokenTag(key))]);
      expect(await observer.holder(first)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-orphan",
        token: g1.token,
      });

      // 2. Its release fails: the next renewal unlocks it.
      failRelease = true;
      expect(await session.release(g1).catch((e: unknown) => e)).toBeInstanceOf(Error);
      failRelease = false;
      expect(await locksOf(app)).toHaveLength(2);
      expect(await session.keepAlive()).toBeUndefined();
      expect(await locksOf(app)).toEqual([]);

      // 3. An orphan of a failed give-back, unlocked by a renewal while another key is held.
      const g2 = granted(await session.acquire(second, TRY));
      failAcquire = true;
      failUnlock = true;
      expect(await session.acquire(first, TRY).catch((e: unknown) => e)).toBeInstanceOf(Error);
      failAcquire = false;
      failUnlock = false;
      expect(await locksOf(app)).toHaveLength(4);
      expect(await session.keepAlive()).toBeUndefined();
      const secondKey = advisoryKey("baton", second);
      expect(await locksOf(app)).toEqual([
        keyLock(secondKey),
        ...tokenLocks(g2.token, tokenTag(secondKey)),
      ]);
      expect(await observer.holder(second)).toEqual({
        remainingMs: expect.any(Number),
        ownerId: "owner-orphan",
        token: g2.token,
      });
      expect(await session.release(g2)).toBe(true);
      expect(await locksOf(app)).toEqual([]);
    });

    it("a session registers its owner once, and a closed session leaves no registration", async () => {
      const app = `tl-${randomUUID().slice(0, 8)}`;
      const session = await open(app, {}, "owner-registered");
      const { rows } = await admin.query(
        `SELECT s.owner FROM baton.sessions s JOIN pg_stat_activity a ON a.pid = s.pid
         WHERE a.application_name = $1`,
        [app],
      );
      expect(rows).toEqual([{ owner: "owner-registered" }]);
      const pid = (
        await admin.query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [app])
      ).rows[0].pid as number;
      await session.close();
      const left = await admin.query(
        "SELECT count(*)::int AS n FROM baton.sessions WHERE pid = $1",
        [pid],
      );
      expect(left.rows[0].n).toBe(0);
    });
  });
});
