import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  type Coordinator,
  createCoordinator,
  type KeySpace,
  LockLostError,
} from "@baton/core";
import type { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ETCD_GUARANTEES, EtcdBackend } from "../src/index.js";
import { hostsOf, type Recording, recordingClient } from "./support/recording-client.js";

const never = () => new AbortController().signal;

/** Every name `listKeys` gives under `prefix`, page by page, with the size of each page. */
async function listAll(
  session: BackendSession,
  space: KeySpace,
  prefix: string,
  limit: number,
): Promise<{ names: string[]; pages: number[] }> {
  const names: string[] = [];
  const pages: number[] = [];
  let cursor: string | undefined;
  do {
    const page = await session.listKeys?.({
      space,
      prefix,
      limit,
      signal: never(),
      ...(cursor === undefined ? {} : { cursor }),
    });
    if (page === undefined) throw new Error("listKeys is missing");
    names.push(...page.keys);
    pages.push(page.keys.length);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return { names, pages };
}

describeBackend("etcd", (url) => {
  describe("etcd inspection and forced release", () => {
    let client: Etcd3;
    let recording: Recording;
    let backend: EtcdBackend;
    const sessions: BackendSession[] = [];
    const base = () => `etcd-ops-${randomUUID().slice(0, 8)}/`;
    const open = async (ownerId: string, ttlMs = 20_000) => {
      const session = await backend.openSession({ ttlMs, ownerId });
      sessions.push(session);
      return session;
    };

    beforeAll(() => {
      ({ client, recording } = recordingClient(hostsOf(url)));
      backend = new EtcdBackend({ client, prefix: "baton-ops/" });
    });
    afterEach(async () => {
      await Promise.allSettled(sessions.splice(0).map((s) => s.close()));
    });
    afterAll(async () => {
      await backend.close();
      client.close();
    });

    it("declares inspection and forced release of one grant", () => {
      expect(ETCD_GUARANTEES.inspection).toBe(true);
      expect(ETCD_GUARANTEES.forceRelease).toBe("grant");
    });

    it("lists the names of each key space under a prefix once, paged by limit", async () => {
      const p = base();
      const a = await open("a");
      const b = await open("b");
      const locks = [`${p}x`, `${p}x/nested`, `${p}y`, `${p}z`, `${p}records:q`];
      for (const lock of locks) await a.acquire(lock, { wait: false, signal: never() });
      // A waiter adds a second key to a name: still listed once.
      const waiting = b.acquire(`${p}x`, { wait: true, signal: never() });
      await b.acquire(`${p}y`, { wait: false, signal: never() });
      await a.acquire(`${base()}outside`, { wait: false, signal: never() });
      await a.acquirePermits?.(`${p}sem`, {
        permits: 1,
        limit: 2,
        mode: "permit",
        wait: false,
        signal: never(),
      });
      await a.writeRecord?.(`${p}job/2026%`, "v", null);

      for (const limit of [1, 2, 1000]) {
        const { names, pages } = await listAll(a, "lock", p, limit);
        expect(names.sort(), `limit ${limit}`).toEqual([...locks].sort());
        for (const size of pages) expect(size).toBeLessThanOrEqual(limit);
      }
      expect((await listAll(a, "lock", `${p}x`, 10)).names.sort()).toEqual([
        `${p}x`,
        `${p}x/nested`,
      ]);
      expect((await listAll(a, "permit", p, 10)).names).toEqual([`${p}sem`]);
      expect((await listAll(a, "record", p, 10)).names).toEqual([`${p}job/2026%`]);
      await a.close();
      await waiting;
    });

    it("inspects a held lock, its waiters in queue order, and nothing once free", async () => {
      const name = `${base()}held`;
      const a = await open("a");
      const b = await open("b");
      const c = await open("c");
      expect(await a.inspectKey?.("lock", name)).toBeNull();
      const grant = await a.acquire(name, { wait: false, signal: never(), value: "worker-7" });
      const waitB = b.acquire(name, { wait: true, signal: never() });
      waitB.catch(() => undefined);
      await expect.poll(async () => (await a.inspectKey?.("lock", name))?.waiters?.count).toBe(1);
      const waitC = c.acquire(name, { wait: true, signal: never() });
      waitC.catch(() => undefined);
      await expect.poll(async () => (await a.inspectKey?.("lock", name))?.waiters?.count).toBe(2);
      const state = await c.inspectKey?.("lock", name);
      expect(state).toEqual({
        holders: [
          { ownerId: "a", token: grant?.token, value: "worker-7", remainingMs: expect.any(Number) },
        ],
        waiters: { count: 2, ownerIds: ["b", "c"] },
      });
      const left = state?.holders[0]?.remainingMs ?? 0;
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThanOrEqual(20_000);
      await b.close();
      await c.close();
      await Promise.allSettled([waitB, waitC]);
      if (grant) await a.release(grant);
      expect(await a.inspectKey?.("lock", name)).toBeNull();
    });

    it("inspects a semaphore: its holders with permits, its waiters and its limit", async () => {
      const name = `${base()}sem`;
      const a = await open("a");
      const b = await open("b");
      const permit = { limit: 3, mode: "permit" as const, signal: never() };
      const held = await a.acquirePermits?.(name, { ...permit, permits: 2, wait: false });
      const waiting = b.acquirePermits?.(name, { ...permit, permits: 2, wait: true });
      waiting?.catch(() => undefined);
      await expect.poll(async () => (await a.inspectKey?.("permit", name))?.waiters?.count).toBe(1);
      expect(await b.inspectKey?.("permit", name)).toEqual({
        holders: [{ ownerId: "a", token: held?.token, permits: 2, mode: "permit" }],
        waiters: { count: 1, ownerIds: ["b"] },
        limit: 3,
      });
      await b.close();
      await waiting?.catch(() => undefined);
      if (held) await a.release(held);
      expect(await a.inspectKey?.("permit", name)).toBeNull();
    });

    it("a lock whose lease ran out is neither inspected nor listed", async () => {
      const p = base();
      const a = await open("a", 2_000);
      const b = await open("b");
      await a.acquire(`${p}expired`, { wait: false, signal: never() });
      expect((await listAll(b, "lock", p, 10)).names).toEqual([`${p}expired`]);
      // No renewal: etcd ends the lease within about a second after its 2 s.
      await expect
        .poll(async () => await b.inspectKey?.("lock", `${p}expired`), { timeout: 10_000 })
        .toBeNull();
      expect((await listAll(b, "lock", p, 10)).names).toEqual([]);
    });

    it("forceRelease frees the holder's grant: the waiter holds at once with a greater token, the holder's next renewal reports it revoked", async () => {
      const name = `${base()}force`;
      const a = await open("a");
      const b = await open("b");
      const operator = await open("operator");
      const first = await a.acquire(name, { wait: false, signal: never() });
      if (first === null) throw new Error("not granted");
      const waiting = b.acquire(name, { wait: true, signal: never() });
      await expect
        .poll(async () => (await operator.inspectKey?.("lock", name))?.waiters?.count)
        .toBe(1);
      // A token that is not the holder's frees nothing.
      const stale = { reason: "stale", signal: never(), token: first.token - 1n };
      expect(await operator.forceRelease?.("lock", name, stale)).toBe(false);
      expect((await operator.inspectKey?.("lock", name))?.holders[0]?.token).toBe(first.token);

      const forcedAt = performance.now();
      const reason = "stuck on a dead socket";
      const options = { reason, signal: never(), token: first.token };
      expect(await operator.forceRelease?.("lock", name, options)).toBe(true);
      const next = await waiting;
      expect(performance.now() - forcedAt).toBeLessThan(5_000);
      expect(next?.token).toBeGreaterThan(first.token);
      expect(await a.keepAlive()).toEqual({
        revoked: [{ space: "lock", key: name, token: first.token, reason }],
      });
      // Reported once; the holder's own release then frees nothing.
      expect(await a.keepAlive()).toBeUndefined();
      expect(await a.release(first)).toBe(false);
      // The same token again: that grant is gone.
      expect(await operator.forceRelease?.("lock", name, options)).toBe(false);
      expect((await operator.inspectKey?.("lock", name))?.holders[0]?.ownerId).toBe("b");
    });

    it("forceRelease of a permit grant frees that grant alone and reports it to its holder", async () => {
      const name = `${base()}sem-force`;
      const a = await open("a");
      const b = await open("b");
      const permit = { limit: 2, mode: "permit" as const, permits: 1, signal: never() };
      const one = await a.acquirePermits?.(name, { ...permit, wait: false });
      const two = await a.acquirePermits?.(name, { ...permit, wait: false });
      if (!one || !two) throw new Error("not granted");
      const waiting = b.acquirePermits?.(name, { ...permit, wait: true });
      await expect.poll(async () => (await b.inspectKey?.("permit", name))?.waiters?.count).toBe(1);
      const options = { reason: "drain", signal: never(), token: one.token };
      expect(await b.forceRelease?.("permit", name, options)).toBe(true);
      const next = await waiting;
      expect(next?.token).toBeGreaterThan(two.token);
      expect(await a.keepAlive()).toEqual({
        revoked: [{ space: "permit", key: name, token: one.token, reason: "drain" }],
      });
      const holders = (await b.inspectKey?.("permit", name))?.holders.map((h) => h.ownerId);
      expect(holders).toEqual(["a", "b"]);
      expect(await a.release(one)).toBe(false);
      expect(await a.release(two)).toBe(true);
    });

    it("a renewal reads the revocations once, then only when the watch saw one written", async () => {
      const name = `${base()}renew`;
      const a = await open("a");
      const operator = await open("operator");
      recording.reset();
      expect(await a.keepAlive()).toBeUndefined();
      expect(recording.kvCalls).toEqual([]);
      const grant = await a.acquire(name, { wait: false, signal: never() });
      const other = await a.acquire(`${name}-other`, { wait: false, signal: never() });
      if (grant === null || other === null) throw new Error("not granted");
      recording.reset();
      // The first renewal holding a grant reads, and starts watching.
      expect(await a.keepAlive()).toBeUndefined();
      expect(recording.kvCalls).toEqual(["range"]);
      for (let i = 0; i < 3; i++) {
        recording.reset();
        expect(await a.keepAlive()).toBeUndefined();
        expect(recording.kvCalls).toEqual([]);
      }
      const options = { reason: "watched", signal: never(), token: grant.token };
      expect(await operator.forceRelease?.("lock", name, options)).toBe(true);
      await expect
        .poll(async () => await a.keepAlive(), { interval: 50 })
        .toEqual({
          revoked: [{ space: "lock", key: name, token: grant.token, reason: "watched" }],
        });
      // The entry read is deleted, and the watch skips deletes: no read after.
      await new Promise((resolve) => setTimeout(resolve, 200));
      recording.reset();
      expect(await a.keepAlive()).toBeUndefined();
      expect(await a.keepAlive()).toBeUndefined();
      expect(recording.kvCalls.filter((c) => c === "range")).toEqual([]);
      expect(await a.release(other)).toBe(true);
    });
  });

  describe("forced release through the coordinator", () => {
    it("the holder's lock aborts with revoked and the reason, the waiter holds with a greater token, list() shows it", async () => {
      const [holder, waiter, operator] = [0, 1, 2].map(() =>
        createCoordinator({ url, ttlMs: 3_000 }),
      ) as [Coordinator, Coordinator, Coordinator];
      try {
        const prefix = `e2e-${randomUUID().slice(0, 8)}/`;
        const name = `${prefix}invoices`;
        const lock = await holder.acquire(name, { value: "worker-7" });
        const waiting = waiter.acquire(name, { waitMs: 30_000 });
        await expect
          .poll(async () => (await operator.inspect(name))?.waiters?.count, { timeout: 10_000 })
          .toBe(1);
        const result = await operator.forceRelease(name, { reason: "stuck on a dead socket" });
        expect(result).toMatchObject({ released: true, space: "lock", token: lock.token });
        const next = await waiting;
        expect(next.token).toBeGreaterThan(lock.token);
        await new Promise<void>((resolve) => {
          if (lock.signal.aborted) resolve();
          else lock.signal.addEventListener("abort", () => resolve(), { once: true });
        });
        const lost = lock.signal.reason as LockLostError;
        expect(lost).toBeInstanceOf(LockLostError);
        expect(lost.reason).toBe("revoked");
        expect(lost.detail).toBe("stuck on a dead socket");
        const listed = [];
        for await (const item of operator.list({ prefix })) listed.push(item);
        expect(listed.map((i) => [i.name, i.holders.map((h) => h.ownerId)])).toEqual([
          [name, [waiter.ownerId]],
        ]);
        await next.release();
      } finally {
        await Promise.all([holder, waiter, operator].map((c) => c.close()));
      }
    }, 60_000);
  });
});
