import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator, type Grant, type LockLostError } from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { lockKeys, RedisBackend } from "../src/index.js";

const never = new AbortController().signal;

/** The random id a Redis session stores in its grants and stands in a line with. */
const sessionIdOf = (session: object): string => (session as { sessionId: string }).sessionId;

describeBackend("redis", (url) => {
  describe("redis session", () => {
    let client: Redis;
    let raw: Redis;
    let backend: RedisBackend;
    const id = randomUUID().slice(0, 8);
    const prefix = `t-${id}:`;
    const closers: (() => Promise<unknown>)[] = [];

    beforeAll(async () => {
      // The subscriber is a duplicate of this client, so it carries the same connection name.
      client = new Redis(url, { lazyConnect: true, connectionName: `baton-test-${id}` });
      raw = new Redis(url, { lazyConnect: true });
      await Promise.all([client.connect(), raw.connect()]);
      backend = new RedisBackend({ client, keyPrefix: prefix });
    });
    afterEach(async () => {
      vi.restoreAllMocks();
      for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    });
    afterAll(async () => {
      await backend.close();
      client.disconnect();
      raw.disconnect();
    });

    const open = async (ownerId: string, ttlMs = 5_000) => {
      const s = await backend.openSession({ ttlMs, ownerId });
      closers.push(() => s.close());
      return s;
    };
    /**
     * What a release does for the first wait in line, by hand and telling nobody: takes its
     * entry out of the line and sets the lock to its payload with `token` for `ms`. Resolves
     * the wait's number.
     */
    const grantFirstInLine = async (
      keys: ReturnType<typeof lockKeys>,
      token: number,
      ms: number,
    ) => {
      const [entry] = await raw.zpopmin(keys.waiters);
      const e = entry as string;
      const colon = e.indexOf(":");
      await raw.set(
        keys.lock,
        `${e.slice(0, colon + 1)}${token}${e.slice(e.indexOf("\n"))}`,
        "PX",
        ms,
      );
      return Number(e.slice(e.indexOf(".") + 1, colon));
    };

    it("acquire is one script call storing session, token, owner and value in the lock key", async () => {
      const s = await open("owner-1");
      const spy = vi.spyOn(client, "evalsha");
      const grant = await s.acquire("one-call", { wait: false, value: "v", signal: never });
      expect(spy).toHaveBeenCalledTimes(1);
      expect(grant?.token).toBeGreaterThan(0n);
      const keys = lockKeys(prefix, "one-call");
      expect(await raw.get(keys.token)).toBe(String(grant?.token));
      const stored = await raw.get(keys.lock);
      expect(stored).toContain(`:${grant?.token}\nowner-1\nv`);
      const pttl = await raw.pttl(keys.lock);
      expect(pttl).toBeGreaterThan(3_000);
      expect(pttl).toBeLessThanOrEqual(5_000);
    });

    it("two sessions with the same owner id exclude each other and cannot release each other's grant", async () => {
      const s1 = await open("same-owner");
      const s2 = await open("same-owner");
      const g1 = await s1.acquire("same-owner", { wait: false, signal: never });
      expect(g1).not.toBeNull();
      expect(await s2.acquire("same-owner", { wait: false, signal: never })).toBeNull();
      if (g1 === null) return;
      expect(await s2.release({ ...g1 })).toBe(false);
      expect(await s2.holder("same-owner")).toMatchObject({
        ownerId: "same-owner",
        token: g1.token,
      });
    });

    it("a refused try takes no token: the next grant's token is exactly one more than the last", async () => {
      const s1 = await open("token-a");
      const s2 = await open("token-b");
      const keys = lockKeys(prefix, "token-step");
      const g1 = await s1.acquire("token-step", { wait: false, signal: never });
      expect(g1).not.toBeNull();
      for (let i = 0; i < 5; i++) {
        expect(await s2.acquire("token-step", { wait: false, signal: never })).toBeNull();
        expect(await raw.get(keys.token)).toBe(String(g1?.token));
      }
      expect(await s1.release(g1 as NonNullable<typeof g1>)).toBe(true);
      const g2 = await s2.acquire("token-step", { wait: false, signal: never });
      expect(g2?.token).toBe((g1?.token ?? 0n) + 1n);
    });

    it("renews every held key in one script call and reports exactly the keys it lost", async () => {
      const s = await open("renewer", 2_000);
      const names = ["r-a", "r-b", "r-c", "r-d", "r-e"];
      for (const n of names) await s.acquire(n, { wait: false, signal: never });
      await raw.del(lockKeys(prefix, "r-c").lock);
      // Someone else takes r-e after it vanished: still lost for us.
      await raw.del(lockKeys(prefix, "r-e").lock);
      const other = await open("other");
      expect(await other.acquire("r-e", { wait: false, signal: never })).not.toBeNull();
      await new Promise((r) => setTimeout(r, 300));
      const spy = vi.spyOn(client, "evalsha");
      const result = await s.keepAlive();
      expect(spy).toHaveBeenCalledTimes(1);
      expect([...(result?.lostKeys ?? [])].sort()).toEqual(["r-c", "r-e"]);
      for (const n of ["r-a", "r-b", "r-d"]) {
        expect(await raw.pttl(lockKeys(prefix, n).lock)).toBeGreaterThan(1_800);
      }
      // A lost key is reported once; the next renewal covers only what is still held.
      expect(await s.keepAlive()).toBeUndefined();
    });

    it("a lost key aborts that lock's signal only; the other locks stay held", async () => {
      const c = createCoordinator({ backend, closeBackend: false, ttlMs: 900 });
      closers.push(() => c.close());
      const a = await c.acquire("lost-a");
      const b = await c.acquire("lost-b");
      await raw.del(lockKeys(prefix, "lost-a").lock);
      await new Promise<void>((resolve) =>
        a.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      expect((a.signal.reason as LockLostError).reason).toBe("key-lost");
      await new Promise((r) => setTimeout(r, 700));
      expect(b.held).toBe(true);
      expect(await c.holder("lost-b")).toMatchObject({ token: b.token });
    });

    it("release is one call: an owner-checked delete and a publish on the lock's channel", async () => {
      const s = await open("releaser");
      const keys = lockKeys(prefix, "rel");
      const grant = await s.acquire("rel", { wait: false, signal: never });
      if (grant === null) throw new Error("not granted");
      const sub = new Redis(url);
      closers.push(async () => sub.disconnect());
      await sub.subscribe(keys.channel);
      const message = new Promise<string>((resolve) => sub.on("message", (ch) => resolve(ch)));
      const spy = vi.spyOn(client, "evalsha");
      expect(await s.release(grant)).toBe(true);
      expect(spy).toHaveBeenCalledTimes(1);
      expect(await message).toBe(keys.channel);
      expect(await raw.exists(keys.lock)).toBe(0);
      expect(await s.release(grant)).toBe(false);
    });

    it("acquires and releases sent in one turn of the event loop: the first goes out at once on an idle connection, the rest four to a write", async () => {
      const s = await open("batched");
      // Once the server knows the scripts (a first call may be sent again as EVAL).
      const first = await s.acquire("batched-first", { wait: false, signal: never });
      await s.release(first as Grant);
      const stream = (client as unknown as { stream: { _write(): void; _writev(): void } }).stream;
      const writes = vi.spyOn(stream, "_write");
      const batches = vi.spyOn(stream, "_writev");
      const names = Array.from({ length: 8 }, (_, i) => `batched-${i}`);
      const grants = await Promise.all(
        names.map((name) => s.acquire(name, { wait: false, signal: never })),
      );
      expect(grants.every((g) => g !== null)).toBe(true);
      // Eight calls, three writes: the first alone (nothing was in flight), then four and
      // three: few system calls, and the server starts on each batch while the next is made.
      expect(writes.mock.calls.length + batches.mock.calls.length).toBe(3);
      writes.mockClear();
      batches.mockClear();
      const released = await Promise.all(grants.map((g) => s.release(g as Grant)));
      expect(released).toEqual(names.map(() => true));
      expect(writes.mock.calls.length + batches.mock.calls.length).toBe(3);
      // Each grant is its own, as when sent one by one.
      expect(new Set(grants.map((g) => g?.token)).size).toBe(names.length);
    });

    it("a lone acquire and a lone release are written before the caller's turn ends", async () => {
      const s = await open("lone");
      // Once the server knows the scripts (a first call may be sent again as EVAL).
      await s.release((await s.acquire("lone-first", { wait: false, signal: never })) as Grant);
      const stream = (client as unknown as { stream: { _write(): void; _writev(): void } }).stream;
      const writes = vi.spyOn(stream, "_write");
      const batches = vi.spyOn(stream, "_writev");
      const acquiring = s.acquire("lone", { wait: false, signal: never });
      // Still in the caller's turn: the request is on its way while the caller goes on.
      expect(writes.mock.calls.length + batches.mock.calls.length).toBe(1);
      const grant = await acquiring;
      expect(grant).not.toBeNull();
      writes.mockClear();
      batches.mockClear();
      const releasing = s.release(grant as Grant);
      expect(writes.mock.calls.length + batches.mock.calls.length).toBe(1);
      expect(await releasing).toBe(true);
    });

    it("a waiter sleeps until the holder's PTTL runs out: no polling while it waits", async () => {
      const frozen = await open("frozen", 1_500);
      await frozen.acquire("pttl", { wait: false, signal: never });
      const waiter = await open("waiter");
      const spy = vi.spyOn(client, "evalsha");
      const started = performance.now();
      const grant = await waiter.acquire("pttl", { wait: true, signal: never });
      const waited = performance.now() - started;
      expect(grant).not.toBeNull();
      expect(waited).toBeGreaterThan(1_000);
      // A try when it arrived, one more once subscribed, one when the PTTL ran out, and spares
      // for a timer racing the expiry and a reply slowed by a busy machine: no polling in
      // between (polling would make dozens in 1.5 s). Only script calls on this lock's keys
      // count: the client is shared with the other sessions of the file.
      const onThisLock = spy.mock.calls.filter((call) =>
        call.flat().some((arg) => typeof arg === "string" && arg.includes("{pttl}")),
      );
      expect(onThisLock.length).toBeGreaterThanOrEqual(2);
      expect(onThisLock.length).toBeLessThanOrEqual(5);
    });

    it("waiters of many sessions and locks share one subscriber connection; a release wakes only the first in line", async () => {
      const holder = await open("holder", 20_000);
      const names = ["w-0", "w-1", "w-2", "w-3"];
      const grants = [];
      for (const n of names) grants.push(await holder.acquire(n, { wait: false, signal: never }));
      // Two waiting sessions per lock; the first of each pair is in line first.
      const waiters = await Promise.all([...names, ...names].map((_, i) => open(`waiter-${i}`)));
      const waits: Promise<unknown>[] = [];
      for (const [i, n] of [...names, ...names].entries()) {
        const w = waiters[i] as (typeof waiters)[number];
        waits.push(w.acquire(n, { wait: true, signal: never }));
        if (i === names.length - 1) await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, 300));
      const clients = (await raw.client("LIST")) as string;
      const ours = clients
        .split("\n")
        .filter((line) => line.includes(`name=baton-test-${id}`) && /\bsub=[1-9]/.test(line));
      // One connection in subscriber mode, on each waiter's own turn channel.
      expect(ours).toHaveLength(1);
      const turns = [...names, ...names].map(
        (n, i) => `${lockKeys(prefix, n).turnPrefix}${sessionIdOf(waiters[i] as object)}`,
      );
      const counts = (await raw.pubsub("NUMSUB", ...turns)) as (string | number)[];
      expect(counts.filter((_, i) => i % 2 === 1).map(Number)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
      for (const n of names) expect(await raw.zcard(lockKeys(prefix, n).waiters)).toBe(2);
      const started = performance.now();
      for (const g of grants) if (g !== null) await holder.release(g);
      // Per lock, the release names the first waiter in line, and only it takes the lock.
      const firsts = await Promise.all(waits.slice(0, names.length));
      expect(firsts.every((g) => g !== null)).toBe(true);
      expect(performance.now() - started).toBeLessThan(3_000);
      const state = waits
        .slice(names.length)
        .map((w) =>
          Promise.race([
            w.then(() => "settled"),
            new Promise((r) => setTimeout(r, 300, "waiting")),
          ]),
        );
      expect(await Promise.all(state)).toEqual(["waiting", "waiting", "waiting", "waiting"]);
      for (const n of names) expect(await raw.zcard(lockKeys(prefix, n).waiters)).toBe(1);
      await Promise.all(waiters.map((w) => w.close()));
      await Promise.allSettled(waits);
    });

    it("waiters take the lock in the order they came (the line), one release each", async () => {
      const holder = await open("line-holder", 20_000);
      let grant = await holder.acquire("line", { wait: false, signal: never });
      const order: number[] = [];
      const sessions = await Promise.all([0, 1, 2, 3].map((i) => open(`line-${i}`, 20_000)));
      const waits = [];
      for (const [i, s] of sessions.entries()) {
        waits.push(
          s.acquire("line", { wait: true, signal: never }).then((g) => {
            order.push(i);
            return { s, g };
          }),
        );
        await new Promise((r) => setTimeout(r, 50));
      }
      const evalsha = vi.spyOn(client, "evalsha");
      if (grant !== null) await holder.release(grant);
      for (let i = 0; i < sessions.length; i++) {
        const next = await Promise.race(waits.filter((_, k) => !order.slice(0, i).includes(k)));
        grant = next.g;
        if (grant !== null) await next.s.release(grant);
      }
      await Promise.all(waits);
      expect(order).toEqual([0, 1, 2, 3]);
      // Releases (5) only: each hands the lock to the next in line, who takes it without a try.
      expect(evalsha).toHaveBeenCalledTimes(5);
    });

    it("a session that waits for the same lock again soon is still subscribed: one try, then it sleeps", async () => {
      const holder = await open("again-holder", 20_000);
      const waiter = await open("again-waiter", 20_000);
      const keys = lockKeys(prefix, "again");
      for (let round = 0; round < 2; round++) {
        const held = await holder.acquire("again", { wait: false, signal: never });
        const evalsha = vi.spyOn(client, "evalsha");
        const waiting = waiter.acquire("again", { wait: true, signal: never });
        await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(1));
        await new Promise((r) => setTimeout(r, 100));
        // First wait: a try, SUBSCRIBE, a try again. Second: the turn channel lingers.
        expect(evalsha).toHaveBeenCalledTimes(round === 0 ? 2 : 1);
        evalsha.mockRestore();
        if (held !== null) await holder.release(held);
        const grant = await waiting;
        if (grant !== null) await waiter.release(grant);
      }
    });

    it("a waiter that froze in line is handed the lock and holds the others off for its own TTL, as a frozen holder would", async () => {
      const holder = await open("frozen-named-holder", 20_000);
      const keys = lockKeys(prefix, "frozen-named");
      const grant = await holder.acquire("frozen-named", { wait: false, signal: never });
      // A waiter in line with a 600 ms TTL that hears its grant but never acts (frozen).
      const frozen = new Redis(url);
      closers.push(async () => frozen.disconnect());
      await frozen.subscribe(`${keys.turnPrefix}frozen`);
      await raw.zadd(keys.waiters, 1, "frozen.1:600\nfrozen-owner");
      const live = await open("live-waiter", 20_000);
      const waiting = live.acquire("frozen-named", { wait: true, signal: never });
      await new Promise((r) => setTimeout(r, 100));
      const started = performance.now();
      if (grant !== null) await holder.release(grant);
      // Handed to the frozen waiter with its own TTL and the next token: nobody else has it.
      expect(await live.holder("frozen-named")).toMatchObject({
        ownerId: "frozen-owner",
        token: (grant?.token ?? 0n) + 1n,
      });
      expect(await raw.get(keys.lock)).toMatch(/^frozen\.1:/);
      const other = await open("barger", 20_000);
      expect(await other.acquire("frozen-named", { wait: false, signal: never })).toBeNull();
      // The live waiter was told the new holder's TTL, and looks again when it runs out (not
      // at the 20 s lease of the holder it saw when it joined).
      const got = await waiting;
      expect(got?.token).toBe((grant?.token ?? 0n) + 2n);
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThan(400);
      expect(waited).toBeLessThan(5_000);
    });

    it("a waiter behind a frozen waiter with its own TTL looks again when that lease runs out, not at the first holder's", async () => {
      const holder = await open("frozen-same-holder", 20_000);
      const keys = lockKeys(prefix, "frozen-same");
      const grant = await holder.acquire("frozen-same", { wait: false, signal: never });
      // A waiter in line with the live waiter's TTL that hears its grant but never acts.
      const frozen = new Redis(url);
      closers.push(async () => frozen.disconnect());
      await frozen.subscribe(`${keys.turnPrefix}frozen`);
      await raw.zadd(keys.waiters, 1, "frozen.1:1000\nfrozen-owner");
      const live = await open("live-same", 1_000);
      const waiting = live.acquire("frozen-same", { wait: true, signal: never });
      await new Promise((r) => setTimeout(r, 100));
      const started = performance.now();
      if (grant !== null) await holder.release(grant);
      expect(await raw.get(keys.lock)).toMatch(/^frozen\.1:/);
      // It joined behind a 20 s lease, but sleeps at most its own TTL.
      const got = await waiting;
      expect(got?.token).toBe((grant?.token ?? 0n) + 2n);
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThan(500);
      expect(waited).toBeLessThan(10_000);
    });

    it("a waiter that is gone (nobody hears its turn) is skipped at once", async () => {
      const holder = await open("gone-named-holder", 20_000);
      const keys = lockKeys(prefix, "gone-named");
      const grant = await holder.acquire("gone-named", { wait: false, signal: never });
      await raw.zadd(keys.waiters, 1, "gone.1:20000\ngone-owner");
      const live = await open("live-waiter-2", 20_000);
      const waiting = live.acquire("gone-named", { wait: true, signal: never });
      await new Promise((r) => setTimeout(r, 100));
      const line = await raw.zrange(keys.waiters, "0", "-1");
      expect(line).toHaveLength(2);
      expect(line[0]).toBe("gone.1:20000\ngone-owner");
      expect(line[1]).toMatch(new RegExp(`^${sessionIdOf(live)}\\.\\d+:20000\\nlive-waiter-2$`));
      if (grant !== null) await holder.release(grant);
      const got = await waiting;
      expect(got).toMatchObject({ ownerId: "live-waiter-2" });
      // The token the gone waiter was offered was never taken: the live one got the next.
      expect(got?.token).toBe((grant?.token ?? 0n) + 1n);
      expect(await raw.zcard(keys.waiters)).toBe(0);
    });

    it("an aborted wait leaves the line and hands on a grant made for it that it had not taken yet", async () => {
      const holder = await open("abort-line-holder", 20_000);
      const keys = lockKeys(prefix, "abort-line");
      await holder.acquire("abort-line", { wait: false, signal: never });
      const waiter = await open("abort-line-waiter", 20_000);
      const controller = new AbortController();
      const waiting = waiter.acquire("abort-line", { wait: true, signal: controller.signal });
      await new Promise((r) => setTimeout(r, 100));
      expect(await raw.zcard(keys.waiters)).toBe(1);
      controller.abort(new Error("gave up"));
      await expect(waiting).rejects.toThrow("gave up");
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(0));
      // A release hands the lock to the next wait, whose message has not arrived (simulated:
      // its line entry is turned into the lock's payload by hand, and nobody is told).
      const again = new AbortController();
      const second = waiter.acquire("abort-line", { wait: true, signal: again.signal });
      second.catch(() => undefined);
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(1));
      const third = await open("abort-line-third", 20_000);
      const thirdWaits = third.acquire("abort-line", { wait: true, signal: never });
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(2));
      await grantFirstInLine(keys, 77, 20_000);
      again.abort(new Error("gave up again"));
      await expect(second).rejects.toThrow("gave up again");
      // Given back, and handed on to the next in line.
      const next = await thirdWaits;
      expect(next).toMatchObject({ ownerId: "abort-line-third" });
      expect(await raw.get(keys.lock)).toMatch(/^[0-9a-f]+\.\d+:\d+\nabort-line-third$/);
    });

    /**
     * Runs `around(send)` in place of the try by which the waiter with owner id `ownerId` joins
     * the line (its ARGV carries its line entry); `send` sends it. Other calls pass through.
     */
    const aroundJoiningTry = (
      ownerId: string,
      around: (send: () => Promise<unknown>) => Promise<unknown>,
    ) => {
      const forward = client.evalsha.bind(client) as (...a: unknown[]) => Promise<unknown>;
      const entry = new RegExp(`^[0-9a-f]+\\.\\d+:\\d+\\n${ownerId}$`);
      return vi.spyOn(client, "evalsha").mockImplementation(((...args: unknown[]) =>
        // Flat or in arrays (LuaScript passes its keys and args as arrays; ioredis flattens).
        args.flat().some((a) => entry.test(String(a)))
          ? around(() => forward(...args))
          : forward(...args)) as never);
    };

    it("a wait given up while its joining try is in flight still leaves the line: the next release goes to a live waiter", async () => {
      const holder = await open("inflight-holder", 20_000);
      const keys = lockKeys(prefix, "inflight");
      const grant = await holder.acquire("inflight", { wait: false, signal: never });
      const quitter = await open("inflight-quitter", 20_000);
      const controller = new AbortController();
      // Abort the moment the quitter's try that joins the line is sent, before the reply: the
      // server puts it in the line all the same.
      const spy = aroundJoiningTry("inflight-quitter", (send) => {
        const sent = send();
        controller.abort(new Error("gave up in flight"));
        return sent;
      });
      await expect(
        quitter.acquire("inflight", { wait: true, signal: controller.signal }),
      ).rejects.toThrow("gave up in flight");
      spy.mockRestore();
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(0));
      const live = await open("inflight-live", 20_000);
      const waiting = live.acquire("inflight", { wait: true, signal: never });
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(1));
      const started = performance.now();
      if (grant !== null) await holder.release(grant);
      // Handed to the live waiter at once, not to the wait that gave up (whose grant would sit
      // unused for its TTL, 20 s here).
      expect(await waiting).toMatchObject({ ownerId: "inflight-live" });
      expect(performance.now() - started).toBeLessThan(2_000);
    });

    it("a wait given up while its joining try is re-sent after NOSCRIPT (a flushed or restarted server) leaves the line after it", async () => {
      const holder = await open("noscript-holder", 20_000);
      const keys = lockKeys(prefix, "noscript");
      const grant = await holder.acquire("noscript", { wait: false, signal: never });
      const quitter = await open("noscript-quitter", 20_000);
      const controller = new AbortController();
      // The server forgets its scripts just before the joining try: EVALSHA gets NOSCRIPT and
      // the script is sent again with EVAL, after anything sent in between.
      const spy = aroundJoiningTry("noscript-quitter", async (send) => {
        await raw.script("FLUSH");
        const sent = send();
        controller.abort(new Error("gave up before the EVAL"));
        return sent;
      });
      await expect(
        quitter.acquire("noscript", { wait: true, signal: controller.signal }),
      ).rejects.toThrow("gave up before the EVAL");
      spy.mockRestore();
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(0));
      await new Promise((r) => setTimeout(r, 100));
      expect(await raw.zcard(keys.waiters)).toBe(0);
      if (grant !== null) await holder.release(grant);
      expect(await raw.exists(keys.lock)).toBe(0);
    });

    it("a wait whose grant message was missed takes the grant on its next try, and a stale grant message of an earlier wait is ignored", async () => {
      const holder = await open("missed-holder", 20_000);
      const keys = lockKeys(prefix, "missed");
      await holder.acquire("missed", { wait: false, signal: never });
      const waiter = await open("missed-waiter", 20_000);
      const waiting = waiter.acquire("missed", { wait: true, signal: never });
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(1));
      // Handed to this wait, but the message is lost (nobody is told).
      const waitNo = await grantFirstInLine(keys, 55, 20_000);
      const turn = `${keys.turnPrefix}${sessionIdOf(waiter)}`;
      // A grant message of an earlier wait of this session: not this wait's, ignored.
      await raw.publish(turn, `g${waitNo - 1}:99`);
      await new Promise((r) => setTimeout(r, 100));
      const state = await Promise.race([
        waiting.then(() => "settled"),
        new Promise((r) => setTimeout(r, 100, "waiting")),
      ]);
      expect(state).toBe("waiting");
      // A message that makes it look again (as a reconnect would): it finds its grant.
      await raw.publish(turn, "b0");
      const got = await waiting;
      expect(got).toMatchObject({ ownerId: "missed-waiter", token: 55n });
      // It is a real grant of this session: renewed and released by the wait's prefix.
      expect((await waiter.keepAlive())?.lostKeys ?? []).toEqual([]);
      expect(await waiter.release(got as NonNullable<typeof got>)).toBe(true);
      expect(await raw.exists(keys.lock)).toBe(0);
    });

    it("a wait renews the lock key by its prefix, so a grant handed to it is covered before it hears", async () => {
      const holder = await open("cover-holder", 20_000);
      const keys = lockKeys(prefix, "cover");
      await holder.acquire("cover", { wait: false, signal: never });
      const waiter = await open("cover-waiter", 1_000);
      const waiting = waiter.acquire("cover", { wait: true, signal: never });
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(1));
      const waitNo = await grantFirstInLine(keys, 5, 300);
      await waiter.keepAlive();
      expect(await raw.pttl(keys.lock)).toBeGreaterThan(500);
      await raw.publish(`${keys.turnPrefix}${sessionIdOf(waiter)}`, `g${waitNo}:5`);
      expect(await waiting).toMatchObject({ token: 5n });
    });

    it("a holder that releases to a waiter and asks again lets the waiter go first", async () => {
      const a = createCoordinator({
        backend,
        closeBackend: false,
        ttlMs: 5_000,
        ownerId: "barger",
      });
      const b = createCoordinator({
        backend,
        closeBackend: false,
        ttlMs: 5_000,
        ownerId: "waiter",
      });
      closers.push(
        () => a.close(),
        () => b.close(),
      );
      const order: string[] = [];
      for (let round = 0; round < 5; round++) {
        const held = await a.acquire("no-barging");
        const waiting = b.acquire("no-barging", { waitMs: 10_000 }).then((l) => {
          order.push("b");
          return l;
        });
        await new Promise((r) => setTimeout(r, 50));
        await held.release();
        const again = a.acquire("no-barging", { waitMs: 10_000 }).then((l) => {
          order.push("a");
          return l;
        });
        await (await waiting).release();
        await (await again).release();
      }
      expect(order).toEqual(["b", "a", "b", "a", "b", "a", "b", "a", "b", "a"]);
    });

    it("watch pushes a grant, then the expiry of a holder that stopped renewing", async () => {
      const watcher = await open("watcher");
      const controller = new AbortController();
      closers.push(async () => controller.abort());
      const watch = watcher.watch?.("watched-expiry", controller.signal);
      if (watch === undefined) throw new Error("no watch");
      const it = watch[Symbol.asyncIterator]();
      expect((await it.next()).value).toBeNull();
      const frozen = await open("frozen-w", 800);
      const grant = await frozen.acquire("watched-expiry", { wait: false, signal: never });
      expect((await it.next()).value).toMatchObject({ ownerId: "frozen-w", token: grant?.token });
      const started = performance.now();
      expect((await it.next()).value).toBeNull();
      // Nobody released it: the watcher woke at the holder's PTTL.
      expect(performance.now() - started).toBeGreaterThan(400);
      controller.abort();
      expect((await it.next()).done).toBe(true);
    });

    it("an aborted wait unsubscribes and leaves no key behind", async () => {
      const holder = await open("holder2");
      await holder.acquire("abort", { wait: false, signal: never });
      const waiter = await open("waiter2");
      const controller = new AbortController();
      const wait = waiter.acquire("abort", { wait: true, signal: controller.signal });
      await new Promise((r) => setTimeout(r, 200));
      const keys = lockKeys(prefix, "abort");
      const turn = `${keys.turnPrefix}${sessionIdOf(waiter)}`;
      const subscribers = async () => Number(((await raw.pubsub("NUMSUB", turn)) as unknown[])[1]);
      expect(await subscribers()).toBe(1);
      const reason = new Error("stop");
      controller.abort(reason);
      await expect(wait).rejects.toBe(reason);
      // Out of the line at once; the turn channel lingers a moment for a next wait, then goes.
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(0));
      await vi.waitFor(async () => expect(await subscribers()).toBe(0), { timeout: 6_000 });
      expect((await raw.keys(`${keys.base}*`)).sort()).toEqual([keys.lock, keys.token].sort());
      expect(await waiter.holder("abort")).toMatchObject({ ownerId: "holder2" });
    });

    it("closing a session frees its locks and wakes their waiters", async () => {
      const s = await open("closer");
      await s.acquire("close-1", { wait: false, signal: never });
      await s.acquire("close-2", { wait: false, signal: never });
      const waiter = await open("after-close");
      const wait = waiter.acquire("close-2", { wait: true, signal: never });
      await new Promise((r) => setTimeout(r, 200));
      const started = performance.now();
      await s.close();
      expect(await wait).not.toBeNull();
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(await raw.exists(lockKeys(prefix, "close-1").lock)).toBe(0);
    });

    it("a session closed while it waits leaves the line", async () => {
      const holder = await open("close-line-holder", 20_000);
      const keys = lockKeys(prefix, "close-line");
      await holder.acquire("close-line", { wait: false, signal: never });
      const waiter = await backend.openSession({ ttlMs: 20_000, ownerId: "close-line-waiter" });
      const wait = waiter.acquire("close-line", { wait: true, signal: never });
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(1));
      await waiter.close();
      await expect(wait).rejects.toThrow();
      await vi.waitFor(async () => expect(await raw.zcard(keys.waiters)).toBe(0));
    });

    it("lock names with braces keep every key of one lock under one hash tag", () => {
      for (const name of ["a}b", "{x}", "}", "%7B", "plain"]) {
        const keys = lockKeys("p:", name);
        const tag = (k: string) => k.slice(k.indexOf("{") + 1, k.indexOf("}", k.indexOf("{")));
        expect(tag(keys.lock)).toBe(tag(keys.token));
        expect(tag(keys.lock).length).toBeGreaterThan(0);
      }
      expect(lockKeys("p:", "{").lock).not.toBe(lockKeys("p:", "%7B").lock);
    });
  });
});
