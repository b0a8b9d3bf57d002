import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import {
  type BackendSession,
  type Coordinator,
  createCoordinator,
  type Grant,
  type KeySpace,
  LockLostError,
} from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { encodeLockName, ZOOKEEPER_GUARANTEES, ZookeeperBackend } from "../src/index.js";
import { childrenOf, inspector, removeTree } from "./support/counting-clients.js";

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

/** Creates a contender as kazoo's `Lock` would: an EPHEMERAL_SEQUENTIAL child of `dir`. */
function kazooContender(client: Client, dir: string, data: string): Promise<string> {
  const prefix = `${randomUUID().replaceAll("-", "")}__lock__`;
  return new Promise((resolve, reject) => {
    client.mkdirp(dir, (mkdirError) => {
      if (mkdirError) return reject(mkdirError);
      client.create(
        `${dir}/${prefix}`,
        Buffer.from(data),
        zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL,
        (error, path) => (error ? reject(error) : resolve(path)),
      );
    });
  });
}

describeBackend("zookeeper", (url) => {
  describe("zookeeper inspection and forced release", () => {
    const prefix = `ops${randomUUID().slice(0, 8)}`;
    let raw: Client;
    let backend: ZookeeperBackend;
    const sessions: BackendSession[] = [];
    const open = async (ownerId: string) => {
      const session = await backend.openSession({ ttlMs: 10_000, ownerId });
      sessions.push(session);
      return session;
    };
    const dirOf = (name: string) => `/${prefix}/${encodeLockName(name)}`;

    beforeAll(async () => {
      raw = await inspector(url.slice("zookeeper://".length));
      backend = ZookeeperBackend.fromUrl(url, { prefix });
    });
    afterEach(async () => {
      await Promise.allSettled(sessions.splice(0).map((s) => s.close()));
    });
    afterAll(async () => {
      await backend.close();
      for (const root of ["", "-permits", "-records", "-revoked"])
        await removeTree(raw, `/${prefix}${root}`).catch(() => undefined);
      raw.close();
    });

    it("declares inspection and forced release of one grant", () => {
      expect(ZOOKEEPER_GUARANTEES.inspection).toBe(true);
      expect(ZOOKEEPER_GUARANTEES.forceRelease).toBe("grant");
    });

    it("lists the names of each key space under a prefix once, paged by limit, without parents left empty", async () => {
      const p = `list-${randomUUID().slice(0, 8)}/`;
      const a = await open("a");
      const b = await open("b");
      const locks = [`${p}x`, `${p}x/nested`, `${p}y`, `${p}z`];
      for (const lock of locks) await a.acquire(lock, { wait: false, signal: never() });
      const waiting = b.acquire(`${p}x`, { wait: true, signal: never() });
      waiting.catch(() => undefined);
      const released = await a.acquire(`${p}released`, { wait: false, signal: never() });
      if (released) await a.release(released);
      await a.acquire(`other-${p}`, { wait: false, signal: never() });
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
      expect((await listAll(a, "permit", p, 10)).names).toEqual([`${p}sem`]);
      expect((await listAll(a, "record", p, 10)).names).toEqual([`${p}job/2026%`]);
    });

    it("inspects a held lock (holder, token, heldMs), its waiters in sequence order, and nothing once free", async () => {
      const name = `held-${randomUUID().slice(0, 8)}`;
      const a = await open("a");
      const b = await open("b");
      const c = await open("c");
      expect(await a.inspectKey?.("lock", name)).toBeNull();
      const grant = (await a.acquire(name, { wait: false, signal: never(), value: "w7" })) as Grant;
      const waitB = b.acquire(name, { wait: true, signal: never() });
      waitB.catch(() => undefined);
      await expect.poll(async () => (await a.inspectKey?.("lock", name))?.waiters?.count).toBe(1);
      const waitC = c.acquire(name, { wait: true, signal: never() });
      waitC.catch(() => undefined);
      await expect.poll(async () => (await a.inspectKey?.("lock", name))?.waiters?.count).toBe(2);
      const state = await c.inspectKey?.("lock", name);
      expect(state).toEqual({
        holders: [{ ownerId: "a", token: grant.token, value: "w7", heldMs: expect.any(Number) }],
        waiters: { count: 2, ownerIds: ["b", "c"] },
      });
      expect(state?.holders[0]?.heldMs).toBeGreaterThanOrEqual(0);
      await b.close();
      await c.close();
      await a.release(grant);
      expect(await a.inspectKey?.("lock", name)).toBeNull();
    });

    it("inspects a kazoo holder as foreign", async () => {
      const name = `kazoo-${randomUUID().slice(0, 8)}`;
      const a = await open("a");
      await kazooContender(raw, dirOf(name), "py-worker");
      expect(await a.inspectKey?.("lock", name)).toMatchObject({
        holders: [{ ownerId: "py-worker", foreign: "kazoo" }],
        waiters: { count: 0, ownerIds: [] },
      });
    });

    it("inspects a semaphore: its holders with permits, its waiters and its limit", async () => {
      const name = `sem-${randomUUID().slice(0, 8)}`;
      const a = await open("a");
      const b = await open("b");
      const permit = { limit: 3, mode: "permit" as const, signal: never() };
      const held = await a.acquirePermits?.(name, { ...permit, permits: 2, wait: false });
      const waiting = b.acquirePermits?.(name, { ...permit, permits: 2, wait: true });
      waiting?.catch(() => undefined);
      await expect.poll(async () => (await a.inspectKey?.("permit", name))?.waiters?.count).toBe(1);
      expect(await b.inspectKey?.("permit", name)).toEqual({
        holders: [
          {
            ownerId: "a",
            token: held?.token,
            permits: 2,
            mode: "permit",
            heldMs: expect.any(Number),
          },
        ],
        waiters: { count: 1, ownerIds: ["b"] },
        limit: 3,
      });
      await b.close();
      if (held) await a.release(held);
      expect(await a.inspectKey?.("permit", name)).toBeNull();
    });

    it("a lock whose holder's session ended is neither inspected nor listed", async () => {
      const p = `gone-${randomUUID().slice(0, 8)}/`;
      const a = await open("a");
      const b = await open("b");
      await a.acquire(`${p}expired`, { wait: false, signal: never() });
      expect((await listAll(b, "lock", p, 10)).names).toEqual([`${p}expired`]);
      await a.close();
      expect(await b.inspectKey?.("lock", `${p}expired`)).toBeNull();
      expect((await listAll(b, "lock", p, 10)).names).toEqual([]);
    });

    it("forceRelease frees the holder's grant: the waiter holds at once with a greater token, the holder's next renewal reports it revoked", async () => {
      const name = `force-${randomUUID().slice(0, 8)}`;
      const a = await open("a");
      const b = await open("b");
      const operator = await open("operator");
      const first = (await a.acquire(name, { wait: false, signal: never() })) as Grant;
      const other = (await a.acquire(`${name}-other`, { wait: false, signal: never() })) as Grant;
      const waiting = b.acquire(name, { wait: true, signal: never() });
      await expect
        .poll(async () => (await operator.inspectKey?.("lock", name))?.waiters?.count)
        .toBe(1);
      const stale = { reason: "stale", signal: never(), token: first.token - 1n };
      expect(await operator.forceRelease?.("lock", name, stale)).toBe(false);
      expect(await a.keepAlive()).toBeUndefined();

      const reason = "stuck on a dead socket";
      const options = { reason, signal: never(), token: first.token };
      expect(await operator.forceRelease?.("lock", name, options)).toBe(true);
      const next = await waiting;
      expect(next?.token).toBeGreaterThan(first.token);
      expect(await a.keepAlive()).toEqual({
        revoked: [{ space: "lock", key: name, token: first.token, reason }],
      });
      // Reported once, and the revocation node is gone once read.
      expect(await a.keepAlive()).toBeUndefined();
      expect(await childrenOf(raw, `/${prefix}-revoked`)).toEqual([]);
      expect(await a.release(first)).toBe(false);
      // The holder's other lock lives on.
      expect(await a.release(other)).toBe(true);
      expect(await operator.forceRelease?.("lock", name, options)).toBe(false);
      expect((await operator.inspectKey?.("lock", name))?.holders[0]?.ownerId).toBe("b");
    });

    it("forceRelease of a permit grant frees that grant alone and reports it to its holder", async () => {
      const name = `sem-force-${randomUUID().slice(0, 8)}`;
      const a = await open("a");
      const b = await open("b");
      const permit = { limit: 2, mode: "permit" as const, permits: 1, signal: never() };
      const one = (await a.acquirePermits?.(name, { ...permit, wait: false })) as Grant;
      const two = (await a.acquirePermits?.(name, { ...permit, wait: false })) as Grant;
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

    it("forceRelease of a foreign holder deletes its node and writes no revocation node", async () => {
      const name = `force-kazoo-${randomUUID().slice(0, 8)}`;
      const a = await open("a");
      await kazooContender(raw, dirOf(name), "py-worker");
      const token = (await a.inspectKey?.("lock", name))?.holders[0]?.token as bigint;
      const before = await childrenOf(raw, `/${prefix}-revoked`);
      expect(await a.forceRelease?.("lock", name, { reason: "x", signal: never(), token })).toBe(
        true,
      );
      expect(await a.inspectKey?.("lock", name)).toBeNull();
      expect(await childrenOf(raw, `/${prefix}-revoked`)).toEqual(before);
    });
  });

  describe("forced release through the coordinator", () => {
    it("the holder's lock aborts with revoked and the reason, the waiter holds with a greater token, list() shows it", async () => {
      const [holder, waiter, operator] = [0, 1, 2].map(() =>
        createCoordinator({ url, ttlMs: 6_000 }),
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
