import { randomUUID } from "node:crypto";
import { readPermits, semaphorePermits, track, writePermits } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  BackendUnavailableError,
  type Grant,
  PermitLimitError,
  READ_WRITE_LIMIT,
  SessionLostError,
} from "@baton/core";
import { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { permitPrefix } from "../src/etcd-keys.js";
import { EtcdBackend } from "../src/index.js";
import { hostsOf, type Recording, recordingClient } from "./support/recording-client.js";

const never = () => new AbortController().signal;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Session = BackendSession &
  Required<Pick<BackendSession, "acquirePermits" | "permitHolders" | "downgrade">>;

describeBackend("etcd", (url) => {
  describe("etcd permits", () => {
    let client: Etcd3;
    let recording: Recording;
    let backend: EtcdBackend;
    const sessions: BackendSession[] = [];
    const name = (label: string) => `etcd-permits-${randomUUID().slice(0, 8)}/${label}`;
    const open = async (ttlMs = 20_000, ownerId = "owner") => {
      const session = (await backend.openSession({ ttlMs, ownerId })) as Session;
      sessions.push(session);
      return session;
    };
    /** Every key of permit key `key`, as text after its range's prefix. */
    const keysOf = async (key: string) => {
      const prefix = permitPrefix("", key);
      const keys = await client.getAll().prefix(prefix).keyBuffers();
      return keys.map((k) => k.subarray(prefix.length).toString()).sort();
    };
    /** Waits until `count` watches were created since the last reset (the waiters are queued). */
    const queued = async (count: number) => {
      while (recording.watchedKeys.length < count) await sleep(5);
    };

    beforeAll(() => {
      ({ client, recording } = recordingClient(hostsOf(url)));
      backend = new EtcdBackend({ client });
    });
    afterEach(async () => {
      await Promise.allSettled(sessions.splice(0).map((s) => s.close()));
    });
    afterAll(async () => {
      await backend.close();
      client.close();
    });

    it("an uncontended acquire and its release are one transaction each, and leave no key", async () => {
      const key = name("one-rt");
      const a = await open();
      recording.reset();
      const permit = await a.acquirePermits(key, semaphorePermits(3));
      expect(recording.kvCalls).toEqual(["txn"]);
      recording.reset();
      const second = await a.acquirePermits(key, semaphorePermits(3, 2));
      expect(recording.kvCalls).toEqual(["txn"]);
      recording.reset();
      const w = await a.acquirePermits(`${key}-rw`, writePermits());
      expect(recording.kvCalls).toEqual(["txn"]);
      recording.reset();
      const r = await a.acquirePermits(`${key}-r`, readPermits());
      expect(recording.kvCalls).toEqual(["txn"]);
      recording.reset();
      for (const grant of [permit, second, w, r])
        expect(await a.release(grant as Grant)).toBe(true);
      expect(recording.kvCalls).toEqual(["txn", "txn", "txn", "txn"]);
      expect(await keysOf(key)).toEqual([]);
      // A write's token stays, for the reads after it.
      expect(await keysOf(`${key}-rw`)).toEqual(["token"]);
    });

    it("a semaphore's permits are granted by prefix sum: a 3-permit request is not overtaken", async () => {
      const key = name("prefix-sum");
      const a = await open(20_000, "a");
      const b = await open(20_000, "b");
      const c = await open(20_000, "c");
      const first = await a.acquirePermits(key, semaphorePermits(3));
      const second = await a.acquirePermits(key, semaphorePermits(3));
      recording.reset();
      const big = track(b.acquirePermits(key, semaphorePermits(3, 3)));
      await queued(1);
      // One permit is free, but the 3-permit request waits ahead: a 1-permit one waits too.
      expect(await c.acquirePermits(key, semaphorePermits(3, 1, { wait: false }))).toBeNull();
      const small = track(c.acquirePermits(key, semaphorePermits(3)));
      await queued(2);
      expect((await a.permitHolders(key)).map((h) => h.ownerId)).toEqual(["a", "a"]);
      await a.release(first as Grant);
      await sleep(200);
      expect(big.settled()).toBe(false);
      await a.release(second as Grant);
      const bigGrant = await big.promise;
      expect(bigGrant?.token).toBeGreaterThan(second?.token ?? 0n);
      await sleep(200);
      expect(small.settled()).toBe(false);
      expect(await b.permitHolders(key)).toEqual([
        { ownerId: "b", token: bigGrant?.token, permits: 3, mode: "permit" },
      ]);
      await b.release(bigGrant as Grant);
      const smallGrant = await small.promise;
      expect(smallGrant?.token).toBeGreaterThan(bigGrant?.token ?? 0n);
    });

    it("one session holds many permits of one key at once, acquired concurrently", async () => {
      const key = name("many");
      const a = await open();
      const grants = await Promise.all(
        Array.from({ length: 5 }, () =>
          a.acquirePermits(key, semaphorePermits(5, 1, { wait: false })),
        ),
      );
      expect(grants.every((g) => g !== null)).toBe(true);
      expect(new Set(grants.map((g) => g?.token)).size).toBe(5);
      expect(await a.acquirePermits(key, semaphorePermits(5, 1, { wait: false }))).toBeNull();
      expect(await a.permitHolders(key)).toHaveLength(5);
      expect(await keysOf(key)).toHaveLength(5 + 1); // the entries and the limit
    });

    it("readers behind a waiting writer wait; the write's token is carried by the reads after it", async () => {
      const key = name("writer-preference");
      const a = await open(20_000, "a");
      const b = await open(20_000, "b");
      const c = await open(20_000, "c");
      const r1 = await a.acquirePermits(key, readPermits());
      expect(r1?.token).toBe(0n);
      recording.reset();
      const w = track(b.acquirePermits(key, writePermits()));
      await queued(1);
      expect(await c.acquirePermits(key, readPermits({ wait: false }))).toBeNull();
      const r2 = track(c.acquirePermits(key, readPermits()));
      await queued(2);
      await sleep(100);
      expect(w.settled() || r2.settled()).toBe(false);
      await a.release(r1 as Grant);
      const wGrant = await w.promise;
      expect(wGrant?.token).toBeGreaterThan(0n);
      expect(await b.permitHolders(key)).toEqual([
        { ownerId: "b", token: wGrant?.token, permits: READ_WRITE_LIMIT, mode: "write" },
      ]);
      await sleep(100);
      expect(r2.settled()).toBe(false);
      await b.release(wGrant as Grant);
      expect((await r2.promise)?.token).toBe(wGrant?.token);
    });

    it("write tokens rise, and a read after the key had no holders carries the last write's", async () => {
      const key = name("tokens");
      const a = await open();
      const b = await open();
      let last = 0n;
      for (let i = 0; i < 3; i++) {
        const w = await (i % 2 === 0 ? a : b).acquirePermits(key, writePermits());
        expect(w?.token).toBeGreaterThan(last);
        last = w?.token ?? 0n;
        await (i % 2 === 0 ? a : b).release(w as Grant);
      }
      await a.close();
      const c = await open();
      const r = await c.acquirePermits(key, readPermits({ wait: false }));
      expect(r?.token).toBe(last);
      // A permit key that never saw a write: reads carry 0n.
      expect((await c.acquirePermits(name("never-written"), readPermits()))?.token).toBe(0n);
      // A write after the reads is greater again, and a waiting write's token too.
      const w = track(b.acquirePermits(key, writePermits()));
      await sleep(100);
      await c.release(r as Grant);
      expect((await w.promise)?.token).toBeGreaterThan(last);
    });

    it("semaphore tokens rise with every grant, waiting or not", async () => {
      const key = name("permit-tokens");
      const a = await open();
      const b = await open();
      const tokens: bigint[] = [];
      const held = await a.acquirePermits(key, semaphorePermits(2, 2));
      tokens.push(held?.token ?? -1n);
      recording.reset();
      const waiting = [
        track(b.acquirePermits(key, semaphorePermits(2))),
        track(b.acquirePermits(key, semaphorePermits(2))),
      ];
      await queued(2);
      await a.release(held as Grant);
      // The two waited side by side: their order is their entries', whichever came first.
      const granted = (await Promise.all(waiting.map((w) => w.promise))).sort((x, y) =>
        (x?.token ?? 0n) < (y?.token ?? 0n) ? -1 : 1,
      );
      for (const g of granted) tokens.push(g?.token ?? -1n);
      const third = track(a.acquirePermits(key, semaphorePermits(2)));
      await queued(3);
      await b.release(granted[0] as Grant);
      tokens.push((await third.promise)?.token ?? -1n);
      await b.release(granted[1] as Grant);
      tokens.push(
        (await a.acquirePermits(key, semaphorePermits(2, 1, { wait: false })))?.token ?? -1n,
      );
      const sorted = [...tokens].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
      expect(tokens).toEqual(sorted);
      expect(new Set(tokens).size).toBe(tokens.length);
    });

    it("downgrade keeps the token, admits the reads queued behind, and still holds off writes", async () => {
      const key = name("downgrade");
      const a = await open(20_000, "a");
      const b = await open(20_000, "b");
      const c = await open(20_000, "c");
      const w = await a.acquirePermits(key, writePermits({ value: "v" }));
      recording.reset();
      const r1 = track(b.acquirePermits(key, readPermits()));
      await queued(1);
      const w2 = track(c.acquirePermits(key, writePermits()));
      await queued(2);
      const r2 = track(b.acquirePermits(key, readPermits()));
      await queued(3);
      recording.reset();
      const down = await a.downgrade(w as Grant);
      expect(recording.kvCalls).toEqual(["txn"]);
      expect(down?.token).toBe(w?.token);
      expect((await r1.promise)?.token).toBe(w?.token);
      await sleep(200);
      expect(w2.settled() || r2.settled()).toBe(false);
      expect(await a.permitHolders(key)).toEqual([
        { ownerId: "a", token: w?.token, permits: 1, mode: "read", value: "v" },
        { ownerId: "b", token: w?.token, permits: 1, mode: "read" },
      ]);
      // The write grant is gone: downgrading it again, or downgrading a read, does nothing.
      expect(await a.downgrade(down as Grant)).toBeNull();
      expect(await b.downgrade((await r1.promise) as Grant)).toBeNull();
      await a.release(down as Grant);
      await b.release((await r1.promise) as Grant);
      const w2Grant = await w2.promise;
      expect(w2Grant?.token).toBeGreaterThan(w?.token ?? 0n);
      await c.release(w2Grant as Grant);
      expect((await r2.promise)?.token).toBe(w2Grant?.token);
    });

    it("downgrade resolves null for a grant that is no longer the session's", async () => {
      const key = name("downgrade-gone");
      const a = await open();
      const b = await open();
      const w = await a.acquirePermits(key, writePermits());
      expect(await b.downgrade(w as Grant)).toBeNull();
      await a.release(w as Grant);
      expect(await a.downgrade(w as Grant)).toBeNull();
      expect(await a.release(w as Grant)).toBe(false);
    });

    it("a different limit rejects with PermitLimitError and leaves nothing behind", async () => {
      const key = name("limit");
      const a = await open();
      const b = await open();
      const held = await a.acquirePermits(key, semaphorePermits(3));
      const before = await keysOf(key);
      const error = await b.acquirePermits(key, semaphorePermits(5)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PermitLimitError);
      expect(error).toMatchObject({ key, stored: 3, requested: 5, field: "permits" });
      await expect(b.acquirePermits(key, readPermits())).rejects.toBeInstanceOf(PermitLimitError);
      expect(await keysOf(key)).toEqual(before);
      // Once nobody holds or waits, the key takes another limit.
      await a.release(held as Grant);
      expect(await b.acquirePermits(key, semaphorePermits(5, 5, { wait: false }))).not.toBeNull();
    });

    it("a limit left behind by entries that expired does not hold off another limit", async () => {
      const key = name("limit-expired");
      const a = await open(2_000);
      await a.acquirePermits(key, semaphorePermits(3));
      // Never renewed: the entry expires, the limit key stays.
      await sleep(3_500);
      expect(await keysOf(key)).toEqual(["limit"]);
      const b = await open();
      expect(await b.acquirePermits(key, semaphorePermits(7, 7, { wait: false }))).not.toBeNull();
    });

    it("an aborted wait rejects with the reason and leaves no entry behind", async () => {
      const key = name("abort");
      const a = await open();
      const b = await open();
      const held = await a.acquirePermits(key, semaphorePermits(1));
      const before = await keysOf(key);
      const controller = new AbortController();
      recording.reset();
      const waiting = b.acquirePermits(key, semaphorePermits(1, 1, { signal: controller.signal }));
      await queued(1);
      expect(await keysOf(key)).toHaveLength(before.length + 1);
      const reason = new Error("gave up");
      controller.abort(reason);
      await expect(waiting).rejects.toBe(reason);
      expect(await keysOf(key)).toEqual(before);
      // A try that finds no room leaves nothing either.
      expect(await b.acquirePermits(key, semaphorePermits(1, 1, { wait: false }))).toBeNull();
      expect(await keysOf(key)).toEqual(before);
      await a.release(held as Grant);
      expect(await keysOf(key)).toEqual([]);
    });

    it("an acquire asked as soon as a wait of its session is aborted is not held back by it", async () => {
      const key = name("abort-then-try");
      const a = await open();
      const b = await open();
      await a.acquirePermits(key, semaphorePermits(2));
      const controller = new AbortController();
      recording.reset();
      const waiting = b.acquirePermits(key, semaphorePermits(2, 2, { signal: controller.signal }));
      await queued(1);
      controller.abort(new Error("gave up"));
      // As core does: it rejects the aborted wait at once, and the next acquire may follow.
      const next = b.acquirePermits(key, semaphorePermits(2, 1, { wait: false }));
      await expect(waiting).rejects.toThrow("gave up");
      expect(await next).not.toBeNull();
    });

    it("a try that meets a release in flight is granted, not told there is no room", async () => {
      const key = name("try-meets-release");
      const a = await open();
      const held = await a.acquirePermits(key, semaphorePermits(1));
      // b's client lets a release land between the try's join and what it does next.
      const other = new Etcd3({ hosts: hostsOf(url) });
      const txn = other.kv.txn.bind(other.kv);
      let between: (() => Promise<unknown>) | undefined;
      other.kv.txn = async (request, options) => {
        const response = await txn(request, options);
        const hook = between;
        between = undefined;
        if (hook !== undefined) await hook();
        return response;
      };
      const otherBackend = new EtcdBackend({ client: other });
      try {
        const b = (await otherBackend.openSession({ ttlMs: 20_000, ownerId: "b" })) as Session;
        between = () => a.release(held as Grant);
        const grant = await b.acquirePermits(key, semaphorePermits(1, 1, { wait: false }));
        expect(grant).not.toBeNull();
        expect(grant?.token).toBeGreaterThan(held?.token ?? 0n);
        expect(await a.permitHolders(key)).toEqual([
          { ownerId: "b", token: grant?.token, permits: 1, mode: "permit" },
        ]);
      } finally {
        await otherBackend.close();
        other.close();
      }
    });

    it("a closed session frees its permits at once, a killed one within a TTL", async () => {
      const key = name("session-end");
      const closed = await open(20_000);
      const killed = await open(2_000);
      const waiter = await open(20_000);
      await closed.acquirePermits(key, semaphorePermits(2));
      await killed.acquirePermits(key, semaphorePermits(2));
      const next = track(waiter.acquirePermits(key, semaphorePermits(2, 2)));
      await closed.close();
      await sleep(200);
      expect(next.settled()).toBe(false);
      // `killed` is never renewed nor closed, as when its process dies.
      const started = performance.now();
      const grant = await next.promise;
      expect(grant).not.toBeNull();
      expect(performance.now() - started).toBeLessThan(2_000 + 3_000);
    });

    it("a waiter whose lease expired while it waited is not told it holds the permits", async () => {
      const key = name("expired-waiter");
      const holder = await open();
      const held = await holder.acquirePermits(key, semaphorePermits(1));
      const waiter = await open(2_000);
      const waiting = waiter.acquirePermits(key, semaphorePermits(1)).then(
        () => "granted",
        (e: unknown) => e,
      );
      await sleep(3_500);
      await holder.release(held as Grant);
      expect(await waiting).toBeInstanceOf(SessionLostError);
      expect(waiter.lost?.aborted).toBe(true);
    });

    it("permits, locks and records of one name are unrelated", async () => {
      const key = name("spaces");
      const a = await open();
      const b = await open();
      const lock = await a.acquire(key, { wait: false, signal: never() });
      expect(lock).not.toBeNull();
      expect(await b.acquirePermits(key, semaphorePermits(1, 1, { wait: false }))).not.toBeNull();
      expect(await b.holder(key)).toMatchObject({ token: lock?.token });
      expect(await b.acquire(key, { wait: false, signal: never() })).toBeNull();
    });

    it("10,000 permits on one session are renewed by its one keepalive request", async () => {
      const keepAlives = countKeepAlives(client);
      const a = (await open(2_000)) as Session;
      const keys = Array.from({ length: 100 }, (_, i) => name(`bulk-${i}`));
      const work = keys.flatMap((key) => Array.from({ length: 100 }, () => key));
      let granted = 0;
      let renewals = 0;
      let acquiring = true;
      /**
       * Renews every 500 ms, one renewal at a time, as core does; counts them. While the 64
       * acquirers load the process, a renewal that ran out of its bound is tried again, as
       * core's keepalive loop does until the lease's deadline; once they are done, every
       * renewal must answer.
       */
      const renew = async (until: () => boolean, retryUnanswered = false) => {
        while (until()) {
          try {
            await a.keepAlive();
            renewals++;
          } catch (error) {
            if (!retryUnanswered || !(error instanceof BackendUnavailableError)) throw error;
          }
          await sleep(500);
        }
      };
      const renewing = renew(() => acquiring, true);
      const run = async () => {
        for (;;) {
          const key = work.pop();
          if (key === undefined) return;
          if (await a.acquirePermits(key, semaphorePermits(100, 1, { wait: false }))) granted++;
        }
      };
      await Promise.all(Array.from({ length: 64 }, run)).finally(() => {
        acquiring = false;
      });
      await renewing;
      expect(granted).toBe(10_000);
      recording.reset();
      const sentBefore = keepAlives.count();
      const renewedBefore = renewals;
      const stop = performance.now() + 4_000;
      await renew(() => performance.now() < stop);
      // With 10,000 permits held, each renewal is one keepalive request (a watch tells of
      // revocations: no read while none was written).
      expect(recording.kvCalls).toEqual([]);
      expect(renewals - renewedBefore).toBeGreaterThan(3);
      expect(keepAlives.count() - sentBefore).toBe(renewals - renewedBefore);
      // Twice the TTL later every entry is still there.
      const holders = await Promise.all(keys.map((key) => a.permitHolders(key)));
      expect(holders.reduce((n, h) => n + h.length, 0)).toBe(10_000);
    }, 120_000);
  });
});

/** Counts the lease keepalive requests sent from now on over `client`'s streams. */
function countKeepAlives(client: Etcd3): { count(): number } {
  let count = 0;
  const leases = client.leaseClient;
  const open = leases.leaseKeepAlive.bind(leases);
  leases.leaseKeepAlive = async (...args: Parameters<typeof open>) => {
    const stream = await open(...args);
    const write = stream.write.bind(stream);
    stream.write = (item) => {
      count++;
      write(item);
    };
    return stream;
  };
  return { count: () => count };
}
