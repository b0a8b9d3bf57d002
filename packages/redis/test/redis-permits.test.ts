import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PermitOverrides, semaphorePermits } from "@baton/conformance";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import {
  type BackendPermitOptions,
  type BackendSession,
  type Grant,
  PermitLimitError,
  type PermitMode,
  READ_WRITE_LIMIT,
  SessionLostError,
} from "@baton/core";
import { Cluster, Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { lockKeys, permitKeys, RedisBackend } from "../src/index.js";

const never = new AbortController().signal;

type Session = BackendSession & Required<Pick<BackendSession, "acquirePermits">>;

/** A permit request: `permits` of `limit`, not waiting unless asked. */
const ask = (
  limit: number,
  permits: number,
  mode: PermitMode = "permit",
  extra: PermitOverrides = {},
) => semaphorePermits(limit, permits, { mode, wait: false, ...extra });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Small seeded PRNG (mulberry32), so a run's choices are the same every time. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Resolves `true` once `p` settles, or `false` after `ms`. */
const settlesWithin = async (p: Promise<unknown>, ms: number): Promise<boolean> => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = await Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<false>((r) => {
      timer = setTimeout(() => r(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return done;
};

/** The raw view of the store the tests inspect: one node, or a Cluster. */
type Raw = Redis | Cluster;

interface Target {
  readonly cluster: boolean;
  /** A backend on the store, with its own client (spied on by the tests). */
  backend(prefix: string): RedisBackend;
  raw(): Raw;
}

/**
 * The permit tests, at the BackendSession level, against one Redis node or a Redis Cluster.
 * Each test uses its own key prefix.
 */
function permitTests(target: () => Target) {
  let prefix = "";
  let backend: RedisBackend;
  const closers: (() => Promise<unknown>)[] = [];

  const fresh = () => {
    prefix = `p-${randomUUID().slice(0, 8)}:`;
    backend = target().backend(prefix);
    closers.push(() => backend.close());
  };
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  });

  const open = async (ownerId: string, ttlMs = 5_000, on = backend): Promise<Session> => {
    const s = (await on.openSession({ ttlMs, ownerId })) as Session;
    closers.push(() => s.close());
    return s;
  };
  const granted = async (s: Session, name: string, options: BackendPermitOptions) => {
    const g = await s.acquirePermits(name, options);
    if (g === null) throw new Error(`no grant of "${name}"`);
    return g;
  };
  /** Every key of permit key `name`, with its contents (but the count of arrivals). */
  const snapshot = async (name: string) => {
    const raw = target().raw();
    const k = permitKeys(prefix, name);
    const { ":n": _arrivals, ...entries } = await raw.hgetall(k.entries);
    return {
      queue: await raw.zrange(k.queue, "0", "-1"),
      entries,
      sessions: await raw.zrange(k.sessions, "0", "-1"),
      token: await raw.get(k.token),
      write: await raw.get(k.writeToken),
    };
  };

  it("an uncontended acquire and its release are one script call each; the key is gone after", async () => {
    fresh();
    const s = await open("owner-1");
    const spy = vi.spyOn(backend.client, "evalsha");
    const g = await granted(s, "one-call", ask(3, 2, "permit", { value: "v" }));
    expect(spy).toHaveBeenCalledTimes(1);
    expect(g.token).toBeGreaterThan(0n);
    expect(await s.permitHolders?.("one-call")).toEqual([
      expect.objectContaining({ ownerId: "owner-1", token: g.token, value: "v", permits: 2 }),
    ]);
    spy.mockClear();
    expect(await s.release(g)).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
    const after = await snapshot("one-call");
    // Only the counter stays (tokens keep rising); the limit went with the last holder.
    expect(after).toEqual({
      queue: [],
      entries: {},
      sessions: [],
      token: String(g.token),
      write: null,
    });
    expect(await s.release(g)).toBe(false);
  });

  it("releases while others hold keep the key's counts exact: freed permits go to the next request, no more", async () => {
    fresh();
    const a = await open("a");
    const b = await open("b");
    const c = await open("c");
    const [a1, a2] = [await granted(a, "counts", ask(4, 1)), await granted(a, "counts", ask(4, 2))];
    const b1 = await granted(b, "counts", ask(4, 1));
    expect(await c.acquirePermits("counts", ask(4, 1))).toBeNull();
    // b's last entry: b leaves the sessions; a's first of two: a stays.
    expect(await b.release(b1)).toBe(true);
    expect(await a.release(a1)).toBe(true);
    const state = await snapshot("counts");
    expect(state.queue).toEqual([(a2.handle as { entry: string }).entry]);
    expect(state.sessions).toEqual([sessionIdOf(a)]);
    expect(state.entries).toMatchObject({ ":h": "2", ":g": "1", ":w": "0", [sessionIdOf(a)]: "1" });
    expect(state.entries[sessionIdOf(b)]).toBeUndefined();
    const c2 = await granted(c, "counts", ask(4, 2));
    expect(await c.acquirePermits("counts", ask(4, 1))).toBeNull();
    expect((await c.permitHolders?.("counts"))?.map((h) => [h.ownerId, h.permits])).toEqual([
      ["a", 2],
      ["c", 2],
    ]);
    expect(c2.token).toBeGreaterThan(b1.token);
  });

  it("permit keys are their own key space: a lock and a semaphore of one name are unrelated", async () => {
    fresh();
    const s = await open("both");
    const lock = await s.acquire("same-name", { wait: false, signal: never });
    expect(lock).not.toBeNull();
    const permit = await granted(s, "same-name", ask(1, 1));
    const other = await open("other");
    expect(await other.acquire("same-name", { wait: false, signal: never })).toBeNull();
    expect(await other.acquirePermits("same-name", ask(1, 1))).toBeNull();
    expect(await s.release(permit)).toBe(true);
    expect(await s.holder("same-name")).toMatchObject({ token: lock?.token });
    const raw = target().raw();
    // One slot for both (the name's hash tag), but no key in common.
    if (target().cluster) {
      const slot = Number(await (raw as Cluster).cluster("KEYSLOT", lockKeys(prefix, "x").lock));
      for (const key of permitKeys(prefix, "x").all) {
        expect(Number(await (raw as Cluster).cluster("KEYSLOT", key))).toBe(slot);
      }
    }
  });

  it("a request never overtakes a waiting one: prefix sums decide, so a multi-permit request is not starved", async () => {
    fresh();
    const a = await open("a");
    const b = await open("b");
    const c = await open("c");
    const ga = await granted(a, "prefix", ask(3, 2));
    // b wants 2 (only 1 free): it waits.
    const wb = b.acquirePermits("prefix", ask(3, 2, "permit", { wait: true }));
    await sleep(200);
    // c wants 1, which is free, but b waits ahead of it.
    expect(await c.acquirePermits("prefix", ask(3, 1))).toBeNull();
    const wc = c.acquirePermits("prefix", ask(3, 1, "permit", { wait: true }));
    await sleep(200);
    expect(await settlesWithin(wc, 100)).toBe(false);
    expect((await a.permitHolders?.("prefix"))?.map((h) => h.ownerId)).toEqual(["a"]);
    expect(await a.release(ga)).toBe(true);
    // One release admits both: 2 + 1 fit the 3 permits.
    const [gb, gc] = await Promise.all([wb, wc]);
    expect(gb?.token).toBe(ga.token + 1n);
    expect(gc?.token).toBe(ga.token + 2n);
    expect((await a.permitHolders?.("prefix"))?.map((h) => [h.ownerId, h.permits])).toEqual([
      ["b", 2],
      ["c", 1],
    ]);
  });

  it("waiters are served in arrival order, each woken by the release that admits it", async () => {
    fresh();
    const holder = await open("holder");
    const first = await granted(holder, "fifo", ask(1, 1));
    const sessions = await Promise.all([0, 1, 2, 3].map((i) => open(`w-${i}`)));
    const order: number[] = [];
    const waits = sessions.map((s, i) =>
      s.acquirePermits("fifo", ask(1, 1, "permit", { wait: true })).then((g) => {
        order.push(i);
        return g as Grant;
      }),
    );
    // Let each join before the next.
    for (let i = 0; i < waits.length; i++) await sleep(100);
    const spy = vi.spyOn(backend.client, "evalsha");
    await holder.release(first);
    for (const [i, w] of waits.entries()) {
      const g = await w;
      await (sessions[i] as Session).release(g);
    }
    expect(order).toEqual([0, 1, 2, 3]);
    // Releases only: each waiter was handed its grant on its turn channel, no try of its own.
    expect(spy.mock.calls.length).toBe(5);
  });

  it("a waiter behind a holder that stopped renewing sleeps until that lease runs out: no polling", async () => {
    fresh();
    const frozen = await open("frozen", 1_500);
    await granted(frozen, "sleepy", ask(1, 1));
    const waiter = await open("waiter", 20_000);
    const spy = vi.spyOn(backend.client, "evalsha");
    const started = performance.now();
    const got = await waiter.acquirePermits("sleepy", ask(1, 1, "permit", { wait: true }));
    expect(got).not.toBeNull();
    expect(performance.now() - started).toBeGreaterThan(1_000);
    // A try when it came, one more once subscribed, one when the lease ran out (and a spare
    // for a timer racing the deadline): nothing in between.
    expect(spy.mock.calls.length).toBeLessThanOrEqual(4);
  });

  it("wait: false leaves nothing behind, and an aborted wait leaves no entry that delays the next", async () => {
    fresh();
    const a = await open("a");
    const b = await open("b");
    const ga = await granted(a, "abort", ask(2, 2));
    const before = await snapshot("abort");
    expect(await b.acquirePermits("abort", ask(2, 1))).toBeNull();
    expect(await snapshot("abort")).toEqual(before);
    const stop = new AbortController();
    const waiting = b.acquirePermits(
      "abort",
      ask(2, 2, "permit", { wait: true, signal: stop.signal }),
    );
    await sleep(200);
    expect((await snapshot("abort")).queue).toHaveLength(2);
    const reason = new Error("gave up");
    stop.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    await sleep(100);
    expect(await snapshot("abort")).toEqual(before);
    // The next request after the release is not held up by it.
    await a.release(ga);
    const c = await open("c");
    expect(await c.acquirePermits("abort", ask(2, 2))).not.toBeNull();
  });

  it("a different limit rejects with PermitLimitError and leaves nothing behind; once the key is idle a new limit is taken", async () => {
    fresh();
    const a = await open("a");
    const b = await open("b");
    const ga = await granted(a, "limit", ask(3, 1));
    const before = await snapshot("limit");
    const error = await b.acquirePermits("limit", ask(4, 1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermitLimitError);
    expect(error).toMatchObject({ key: "limit", stored: 3, requested: 4, field: "permits" });
    await expect(
      b.acquirePermits("limit", ask(4, 1, "permit", { wait: true })),
    ).rejects.toBeInstanceOf(PermitLimitError);
    expect(await snapshot("limit")).toEqual(before);
    await a.release(ga);
    expect(await b.acquirePermits("limit", ask(4, 4))).not.toBeNull();
  });

  it("tokens: permits and writes rise strictly; a read carries the newest write's, also after the key had no holders", async () => {
    fresh();
    const s = await open("rw");
    const rw = READ_WRITE_LIMIT;
    const r0 = await granted(s, "tokens", ask(rw, 1, "read"));
    expect(r0.token).toBe(0n);
    await s.release(r0);
    const w1 = await granted(s, "tokens", ask(rw, rw, "write"));
    await s.release(w1);
    expect((await snapshot("tokens")).queue).toEqual([]);
    // Nobody holds the key now; the newest write's token is kept.
    const r1 = await granted(s, "tokens", ask(rw, 1, "read"));
    const r2 = await granted(s, "tokens", ask(rw, 1, "read"));
    expect([r1.token, r2.token]).toEqual([w1.token, w1.token]);
    await s.release(r1);
    await s.release(r2);
    const w2 = await granted(s, "tokens", ask(rw, rw, "write"));
    expect(w2.token).toBeGreaterThan(w1.token);
    await s.release(w2);
    // A semaphore on the same name later: its tokens go on from the same counter.
    const p = await granted(s, "tokens", ask(5, 1));
    expect(p.token).toBe(w2.token + 1n);
    await s.release(p);
    expect((await granted(s, "tokens", ask(rw, 1, "read"))).token).toBe(w2.token);
  });

  it("writer preference: readers behind a waiting writer wait; the writer gets in once the readers ahead leave", async () => {
    fresh();
    const rw = READ_WRITE_LIMIT;
    const r = await open("reader");
    const w = await open("writer");
    const late = await open("late-reader");
    const read = await granted(r, "pref", ask(rw, 1, "read"));
    const write = w.acquirePermits("pref", ask(rw, rw, "write", { wait: true }));
    await sleep(200);
    expect(await late.acquirePermits("pref", ask(rw, 1, "read"))).toBeNull();
    const lateRead = late.acquirePermits("pref", ask(rw, 1, "read", { wait: true }));
    await sleep(100);
    await r.release(read);
    const gw = (await write) as Grant;
    expect(gw.token).toBeGreaterThan(read.token);
    expect(await settlesWithin(lateRead, 200)).toBe(false);
    await w.release(gw);
    expect((await lateRead)?.token).toBe(gw.token);
  });

  it("downgrade turns the write into a read with the same token and admits the readers queued behind it, not a writer", async () => {
    fresh();
    const rw = READ_WRITE_LIMIT;
    const w = await open("writer");
    const readers = await Promise.all([open("r-1"), open("r-2")]);
    const w2 = await open("writer-2");
    const write = await granted(w, "down", ask(rw, rw, "write"));
    const reads = readers.map((s) => s.acquirePermits("down", ask(rw, 1, "read", { wait: true })));
    await sleep(200);
    const nextWrite = w2.acquirePermits("down", ask(rw, rw, "write", { wait: true }));
    await sleep(100);
    const read = await w.downgrade?.(write);
    expect(read?.token).toBe(write.token);
    // Both readers start at once, with the write's token; the second writer still waits.
    const got = await Promise.all(reads);
    expect(got.map((g) => g?.token)).toEqual([write.token, write.token]);
    expect(await settlesWithin(nextWrite, 200)).toBe(false);
    expect((await w.permitHolders?.("down"))?.map((h) => [h.ownerId, h.mode, h.permits])).toEqual([
      ["writer", "read", 1],
      ["r-1", "read", 1],
      ["r-2", "read", 1],
    ]);
    // The write's grant no longer releases anything; the read's does.
    expect(await w.release(write)).toBe(false);
    expect(await w.downgrade?.(write)).toBeNull();
    expect(await w.release(read as Grant)).toBe(true);
    for (const [i, g] of got.entries()) await (readers[i] as Session).release(g as Grant);
    expect((await nextWrite)?.token).toBeGreaterThan(write.token);
  });

  it("a session whose process died (connection closed, nothing released) frees its permits within one TTL, and a waiter gets them", async () => {
    fresh();
    const doomedBackend = target().backend(prefix);
    closers.push(() => doomedBackend.close());
    const doomed = await open("doomed", 1_000, doomedBackend);
    const g = await granted(doomed, "death", ask(2, 2));
    await granted(doomed, "death-2", ask(1, 1));
    const lastGrant = performance.now();
    // Killed: its client goes away without a release, and nothing renews it.
    doomedBackend.client.disconnect();
    const waiter = await open("waiter", 5_000);
    const started = performance.now();
    const got = await waiter.acquirePermits("death", ask(2, 1, "permit", { wait: true }));
    const waited = performance.now() - started;
    expect(got?.token).toBe(g.token + 1n);
    expect(waited).toBeLessThan(1_000 + 1_500);
    // The key nobody waited for: a read of its holders drops the dead entries too, once the
    // TTL of its grant ran out.
    await sleep(Math.max(0, lastGrant + 1_100 - performance.now()));
    expect(await waiter.permitHolders?.("death-2")).toEqual([]);
    expect((await snapshot("death-2")).queue).toEqual([]);
  });

  it("renewal keeps every permit past its TTL; 10,000 permits of one session are renewed in one request", async () => {
    fresh();
    const s = await open("many", 1_500);
    const grants: Grant[] = [];
    for (let i = 0; i < 10_000; i += 500) {
      const batch = await Promise.all(
        Array.from({ length: 500 }, () => granted(s, "many", ask(1_000_000, 1))),
      );
      grants.push(...batch);
    }
    const lock = await s.acquire("a-lock", { wait: false, signal: never });
    expect(lock).not.toBeNull();
    const spy = vi.spyOn(backend.client, "evalsha");
    const commands = await watchCommands(target());
    expect(await s.keepAlive()).toBeUndefined();
    const ours = (await commands.stop()).filter((c) =>
      c.slice(1).some((a) => a.startsWith(prefix)),
    );
    // One request: one script call (two on a Cluster, where the lock and the permits live in
    // two slots, sent together); inside it one deadline raised for the 10,000 permits.
    const calls = target().cluster ? 2 : 1;
    expect(spy).toHaveBeenCalledTimes(calls);
    expect(ours.filter((c) => c[0] === "evalsha")).toHaveLength(calls);
    expect(ours.filter((c) => c[0] === "zadd")).toEqual([
      ["zadd", permitKeys(prefix, "many").sessions, "XX", expect.any(String), sessionIdOf(s)],
    ]);
    expect(ours.filter((c) => c[0] === "pexpire")).toHaveLength(1);
    for (let i = 0; i < 3; i++) {
      await sleep(600);
      await s.keepAlive();
    }
    // Past twice the TTL: all still held, and another session sees them.
    const other = await open("other");
    const holders = (await other.permitHolders?.("many")) ?? [];
    expect(holders).toHaveLength(10_000);
    expect(holders[0]?.remainingMs).toBeGreaterThan(0);
    expect(await s.release(grants[0] as Grant)).toBe(true);
    expect(await s.release(grants[0] as Grant)).toBe(false);
  });

  it("permits whose keys vanished from the store end the session, also when it acquires there again before its renewal", async () => {
    fresh();
    const raw = target().raw();
    const s = await open("flushed");
    await granted(s, "flushed", ask(3, 1));
    const k = permitKeys(prefix, "flushed");
    // Lost with the store's data (FLUSHALL, an evicted key): the queue, entries and sessions.
    await raw.del(k.queue, k.entries, k.sessions);
    // The next grant there re-creates the key, with nothing of the first one.
    await granted(s, "flushed", ask(3, 1));
    await expect(s.keepAlive()).rejects.toBeInstanceOf(SessionLostError);
    const other = await open("other");
    await granted(other, "gone", ask(1, 1));
    await raw.del(...permitKeys(prefix, "gone").all.slice(0, 3));
    await expect(other.keepAlive()).rejects.toBeInstanceOf(SessionLostError);
  });

  it("a closing session releases every permit it holds and leaves the queue; the waiters behind are admitted", async () => {
    fresh();
    const s = await open("closer");
    for (let i = 0; i < 3; i++) await granted(s, "close", ask(3, 1));
    const waiter = await open("waiter");
    const wait = waiter.acquirePermits("close", ask(3, 3, "permit", { wait: true }));
    await sleep(200);
    await s.close();
    expect(await wait).not.toBeNull();
    expect((await waiter.permitHolders?.("close"))?.map((h) => h.ownerId)).toEqual(["waiter"]);
  });

  it("under churn (waits aborted in flight, tries, multi-permit requests, sessions on two backends) never more than the limit is held, and nothing is left once all end", async () => {
    fresh();
    const second = target().backend(prefix);
    closers.push(() => second.close());
    const random = prng(0x5eed);
    const sessions = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        open(`churn-${i}`, 20_000, i % 2 === 0 ? backend : second),
      ),
    );
    const limit = 3;
    let held = 0;
    let most = 0;
    let grants = 0;
    const tokens = new Set<bigint>();
    let aborted = 0;
    const until = performance.now() + 4_000;
    await Promise.all(
      sessions.map(async (s) => {
        while (performance.now() < until) {
          const permits = random() < 0.3 ? 2 : 1;
          const roll = random();
          const stop = new AbortController();
          const budget =
            roll < 0.2
              ? undefined
              : setTimeout(() => stop.abort(new Error("budget")), 5 + random() * 300);
          const g = await s
            .acquirePermits(
              "churn",
              ask(limit, permits, "permit", { wait: budget !== undefined, signal: stop.signal }),
            )
            .catch((e: unknown) => {
              if ((e as Error).message !== "budget") throw e;
              aborted++;
              return null;
            });
          clearTimeout(budget);
          if (g === null) continue;
          grants++;
          // Replies of two sessions may arrive in either order: every token is new, though.
          expect(tokens.has(g.token)).toBe(false);
          tokens.add(g.token);
          held += permits;
          most = Math.max(most, held);
          expect(held).toBeLessThanOrEqual(limit);
          await sleep(random() * 20);
          held -= permits;
          expect(await s.release(g)).toBe(true);
        }
      }),
    );
    console.info(`[redis permits] churn: ${grants} grants, ${aborted} waits aborted`);
    expect(grants).toBeGreaterThan(20);
    expect(aborted).toBeGreaterThan(5);
    expect(most).toBeGreaterThan(1);
    await sleep(200); // leaves of aborted waits are sent after their last try settles
    const left = await snapshot("churn");
    expect({ queue: left.queue, entries: left.entries, sessions: left.sessions }).toEqual({
      queue: [],
      entries: {},
      sessions: [],
    });
  }, 30_000);

  it("one session holds many permits of one key at once, acquired concurrently, and waits behind its own", async () => {
    fresh();
    const s = await open("one");
    const held = await Promise.all(
      Array.from({ length: 3 }, () =>
        s.acquirePermits("mine", ask(3, 1, "permit", { wait: true })),
      ),
    );
    expect(new Set(held.map((g) => g?.token)).size).toBe(3);
    const more = [0, 1].map(() => s.acquirePermits("mine", ask(3, 1, "permit", { wait: true })));
    await sleep(200);
    expect(await settlesWithin(Promise.race(more), 100)).toBe(false);
    await s.release(held[1] as Grant);
    const first = await Promise.race(more);
    expect(first?.token).toBeGreaterThan(held[2]?.token ?? 0n);
    await s.release(held[0] as Grant);
    expect((await Promise.all(more)).every((g) => g !== null)).toBe(true);
    expect((await s.permitHolders?.("mine"))?.map((h) => h.ownerId)).toEqual(["one", "one", "one"]);
  });
}

/** The random id a Redis session stores in its entries. */
const sessionIdOf = (session: object): string => (session as { sessionId: string }).sessionId;

/**
 * Records the commands every node of the store runs from now (`MONITOR`, scripts' inner
 * commands included), each as its arguments with the name in lower case.
 */
async function watchCommands(target: Target): Promise<{ stop(): Promise<string[][]> }> {
  const raw = target.raw();
  const nodes = raw instanceof Cluster ? raw.nodes("master") : [raw];
  const seen: string[][] = [];
  const monitors = await Promise.all(
    nodes.map(async (n) => {
      // Made here rather than by `monitor()`, so an error listener is in place before MONITOR
      // is sent: other test files share the server, and ioredis reports the lines that arrive
      // with MONITOR's own reply, before it has switched modes, as an "error" (lines of other
      // files' commands, from before this one starts).
      const m = n.duplicate({ monitor: true, lazyConnect: true });
      m.on("error", () => undefined);
      m.on("monitor", (_time: string, args: string[]) => {
        seen.push([String(args[0]).toLowerCase(), ...args.slice(1).map(String)]);
      });
      const monitoring = new Promise((resolve) => m.once("monitoring", resolve));
      await m.connect();
      await monitoring;
      return m;
    }),
  );
  await sleep(50);
  return {
    async stop() {
      await sleep(50);
      for (const m of monitors) m.disconnect();
      return seen;
    },
  };
}

describeBackend("redis", (url) => {
  describe("redis permits (one node)", () => {
    let raw: Redis;
    beforeAll(async () => {
      raw = new Redis(url, { lazyConnect: true });
      await raw.connect();
    });
    afterAll(() => raw.disconnect());
    permitTests(() => ({
      cluster: false,
      backend: (keyPrefix) => new RedisBackend({ url, keyPrefix }),
      raw: () => raw,
    }));
  });

  describe("redis permits (Cluster)", () => {
    let cluster: ServerGroup | undefined;
    let dir: string | undefined;
    let raw: Cluster;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "baton-redis-permits-"));
      cluster = await startRedisCluster({ dir });
      raw = new Cluster(announced(cluster));
    });
    afterAll(async () => {
      raw?.disconnect();
      await cluster?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });
    permitTests(() => ({
      cluster: true,
      // A new Cluster client connects to every master and reads the slot map before its first
      // command: on a loaded machine that can take longer than the default 2 s bound.
      backend: (keyPrefix) =>
        new RedisBackend({ url: (cluster as ServerGroup).url, keyPrefix, commandTimeoutMs: 5_000 }),
      raw: () => raw,
    }));
  });
});

/** Each node's address as it announces it. */
function announced(group: ServerGroup): { host: string; port: number }[] {
  return group.members.map((m) => {
    const [host, port] = m.address.split(":");
    return { host: host as string, port: Number(port) };
  });
}
