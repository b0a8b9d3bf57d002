import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { semaphorePermits } from "@baton/conformance";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import {
  type BackendSession,
  createCoordinator,
  type Grant,
  type KeySpace,
  LockLostError,
} from "@baton/core";
import { Cluster, Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { lockKeys, RedisBackend } from "../src/index.js";
import {
  closeNodeRedis,
  NODE_REDIS,
  type NodeRedisMajor,
  nodeRedisClient,
  nodeRedisCluster,
  type TestNodeRedis,
} from "./node-redis-clients.js";

const never = new AbortController().signal;

type Session = BackendSession &
  Required<Pick<BackendSession, "acquirePermits" | "listKeys" | "inspectKey" | "forceRelease">>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves what `p` resolves, or `"pending"` after `ms`. */
const within = async <T>(p: Promise<T>, ms: number): Promise<T | "pending"> => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const out = await Promise.race([
    p,
    new Promise<"pending">((r) => {
      timer = setTimeout(() => r("pending"), ms);
    }),
  ]);
  clearTimeout(timer);
  return out;
};

interface Target {
  readonly cluster: boolean;
  backend(prefix: string): RedisBackend;
  /** An app's node-redis client (or cluster) of `major` on the same store. */
  nodeRedis(major: NodeRedisMajor): Promise<TestNodeRedis>;
  raw(): Redis | Cluster;
}

/**
 * Inspection and forced release at the BackendSession level, against one Redis node or a
 * Redis Cluster. Each test uses its own key prefix.
 */
function inspectionTests(target: () => Target) {
  let prefix = "";
  let backend: RedisBackend;
  const closers: (() => Promise<unknown>)[] = [];

  const fresh = () => {
    prefix = `i-${randomUUID().slice(0, 8)}:`;
    backend = target().backend(prefix);
    closers.push(() => backend.close());
  };
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  });
  const open = async (ownerId: string, ttlMs = 5_000): Promise<Session> => {
    const s = (await backend.openSession({ ttlMs, ownerId })) as Session;
    closers.push(() => s.close());
    return s;
  };
  const take = async (s: Session, name: string, value?: string): Promise<Grant> => {
    const g = await s.acquire(name, {
      wait: false,
      signal: never,
      ...(value === undefined ? {} : { value }),
    });
    if (g === null) throw new Error(`"${name}" is taken`);
    return g;
  };
  /** Every key of a key space under `namePrefix`, page by page of `limit`. */
  const listAll = async (s: Session, space: KeySpace, namePrefix: string, limit: number) => {
    const keys: string[] = [];
    let pages = 0;
    let cursor: string | undefined;
    do {
      const page = await s.listKeys({
        space,
        prefix: namePrefix,
        limit,
        signal: never,
        ...(cursor === undefined ? {} : { cursor }),
      });
      expect(page.keys.length).toBeLessThanOrEqual(limit);
      keys.push(...page.keys);
      cursor = page.cursor;
      pages++;
    } while (cursor !== undefined);
    return { keys, pages };
  };

  it("lists every held lock once over several pages, by its name, filtered by prefix", async () => {
    fresh();
    const s = await open("lister");
    // Names with the characters the key layout escapes ({ } %) or SCAN reads as a glob.
    const names = [
      ...Array.from({ length: 9 }, (_, i) => `jobs/${i}`),
      "jobs/{braced}",
      "jobs/100%",
      "jobs/*[x]?",
    ];
    for (const name of names) await take(s, name);
    await take(s, "other/1");
    await s.acquirePermits("jobs/sem", semaphorePermits(2, 1, { wait: false }));
    const { keys, pages } = await listAll(s, "lock", "jobs/", 3);
    expect(pages).toBeGreaterThan(1);
    expect([...keys].sort()).toEqual([...names].sort());
    expect((await listAll(s, "lock", "", 1000)).keys.sort()).toEqual([...names, "other/1"].sort());
    expect((await listAll(s, "lock", "jobs/*", 10)).keys).toEqual(["jobs/*[x]?"]);
    expect((await listAll(s, "permit", "", 10)).keys).toEqual(["jobs/sem"]);
    if (target().cluster) {
      // The names live on more than one master, and the listing walked them all.
      const raw = target().raw() as Cluster;
      const slots = await Promise.all(
        names.map((n) => raw.cluster("KEYSLOT", lockKeys(prefix, n).lock)),
      );
      const owners = new Set<string>();
      for (const [from, to, master] of await raw.cluster("SLOTS")) {
        if (slots.some((slot) => Number(slot) >= from && Number(slot) <= to)) {
          owners.add(`${master?.[0]}:${master?.[1]}`);
        }
      }
      expect(owners.size).toBeGreaterThan(1);
    }
  });

  for (const major of Object.keys(NODE_REDIS) as NodeRedisMajor[]) {
    it(`lists through an app's ${major} client too, every master of a Cluster`, async () => {
      fresh();
      const client = await target().nodeRedis(major);
      closers.push(() => closeNodeRedis(client));
      const nodeBackend = new RedisBackend({ client, keyPrefix: prefix });
      closers.push(() => nodeBackend.close());
      const s = (await nodeBackend.openSession({ ttlMs: 5_000, ownerId: "nr" })) as Session;
      closers.push(() => s.close());
      const names = Array.from({ length: 8 }, (_, i) => `nr/${i}`);
      for (const name of names) await take(s, name);
      expect((await listAll(s, "lock", "nr/", 3)).keys.sort()).toEqual(names);
    });
  }

  it("a released or expired lock is no longer listed, and inspects as null", async () => {
    fresh();
    const s = await open("short", 300);
    const g = await take(s, "gone/released");
    await take(s, "gone/expired");
    expect(await s.release(g)).toBe(true);
    expect(await s.inspectKey("lock", "gone/released")).toBeNull();
    await sleep(600);
    expect(await s.inspectKey("lock", "gone/expired")).toBeNull();
    expect((await listAll(s, "lock", "gone/", 10)).keys).toEqual([]);
  });

  it("inspects a held lock: owner, token, value and remaining lease", async () => {
    fresh();
    const s = await open("holder-a", 4_000);
    const g = await take(s, "held", "payload");
    const state = await s.inspectKey("lock", "held");
    expect(state?.holders).toHaveLength(1);
    expect(state?.holders[0]).toMatchObject({
      ownerId: "holder-a",
      token: g.token,
      value: "payload",
    });
    expect(state?.holders[0]?.remainingMs).toBeGreaterThan(0);
    expect(state?.holders[0]?.remainingMs).toBeLessThanOrEqual(4_000);
    expect(state?.waiters).toBeUndefined();
  });

  it("inspects a lock's waiters in line order", async () => {
    fresh();
    const holder = await open("holder");
    const w1 = await open("waiter-1");
    const w2 = await open("waiter-2");
    const g = await take(holder, "line");
    const first = w1.acquire("line", { wait: true, signal: never });
    await sleep(200);
    const second = w2.acquire("line", { wait: true, signal: never });
    await sleep(200);
    const state = await holder.inspectKey("lock", "line");
    expect(state?.holders.map((h) => h.ownerId)).toEqual(["holder"]);
    expect(state?.waiters).toEqual({ count: 2, ownerIds: ["waiter-1", "waiter-2"] });
    await holder.release(g);
    const g1 = await first;
    expect((await w1.inspectKey("lock", "line"))?.waiters).toEqual({
      count: 1,
      ownerIds: ["waiter-2"],
    });
    if (g1 !== null) await w1.release(g1);
    const g2 = await second;
    if (g2 !== null) await w2.release(g2);
  });

  it("inspects a permit key: holders with permits and mode, the limit, the waiters", async () => {
    fresh();
    const a = await open("a");
    const b = await open("b");
    const c = await open("c");
    const ga = await a.acquirePermits("sem", semaphorePermits(3, 2, { wait: false, value: "va" }));
    const gb = await b.acquirePermits("sem", semaphorePermits(3, 1, { wait: false }));
    const waiting = c.acquirePermits("sem", semaphorePermits(3, 2, { wait: true }));
    await sleep(200);
    const state = await a.inspectKey("permit", "sem");
    expect(state?.limit).toBe(3);
    expect(state?.holders).toEqual([
      expect.objectContaining({
        ownerId: "a",
        token: ga?.token,
        value: "va",
        permits: 2,
        mode: "permit",
      }),
      expect.objectContaining({ ownerId: "b", token: gb?.token, permits: 1, mode: "permit" }),
    ]);
    expect(state?.holders[0]?.remainingMs).toBeGreaterThan(0);
    expect(state?.waiters).toEqual({ count: 1, ownerIds: ["c"] });
    expect(await a.inspectKey("lock", "sem")).toBeNull();
    expect(await a.inspectKey("permit", "nothing-here")).toBeNull();
    if (ga !== null) await a.release(ga);
    const gc = await waiting;
    expect(gc).not.toBeNull();
  });

  it("a forced release frees the lock by token; a stale token frees nothing", async () => {
    fresh();
    const holder = await open("holder");
    const operator = await open("operator");
    const g = await take(holder, "stuck");
    expect(
      await operator.forceRelease("lock", "stuck", {
        token: g.token - 1n,
        reason: "wrong one",
        signal: never,
      }),
    ).toBe(false);
    expect(await operator.inspectKey("lock", "stuck")).not.toBeNull();
    expect(
      await operator.forceRelease("lock", "stuck", {
        token: g.token,
        reason: "stuck",
        signal: never,
      }),
    ).toBe(true);
    expect(await operator.inspectKey("lock", "stuck")).toBeNull();
    // Freed already: the same token again frees nothing, nor does it free a later grant.
    expect(
      await operator.forceRelease("lock", "stuck", {
        token: g.token,
        reason: "again",
        signal: never,
      }),
    ).toBe(false);
    const next = await take(operator, "stuck");
    expect(next.token).toBeGreaterThan(g.token);
    expect(
      await operator.forceRelease("lock", "stuck", {
        token: g.token,
        reason: "late",
        signal: never,
      }),
    ).toBe(false);
    expect((await operator.inspectKey("lock", "stuck"))?.holders[0]?.token).toBe(next.token);
    // The old holder's release is refused: the grant is not its any more.
    expect(await holder.release(g)).toBe(false);
  });

  it("the next waiter gets a force-released lock at once with a greater token; the holder's renewal reports the revocation with its reason", async () => {
    fresh();
    const holder = await open("holder", 20_000);
    const waiter = await open("waiter", 20_000);
    const operator = await open("operator");
    const g = await take(holder, "handover");
    const other = await take(holder, "kept");
    const waiting = waiter.acquire("handover", { wait: true, signal: never });
    await sleep(200);
    expect(await within(waiting, 50)).toBe("pending");
    expect(
      await operator.forceRelease("lock", "handover", {
        token: g.token,
        reason: "deploy stuck, freed by ops",
        signal: never,
      }),
    ).toBe(true);
    // Long before the holder's 20 s lease would have run out.
    const next = await within(waiting, 5_000);
    expect(next).not.toBe("pending");
    expect((next as Grant).token).toBeGreaterThan(g.token);
    expect(await holder.keepAlive()).toEqual({
      revoked: [
        { space: "lock", key: "handover", token: g.token, reason: "deploy stuck, freed by ops" },
      ],
    });
    // Reported once; the holder's other lock lives on.
    expect(await holder.keepAlive()).toBeUndefined();
    expect((await operator.inspectKey("lock", "kept"))?.holders[0]?.token).toBe(other.token);
    expect((await operator.inspectKey("lock", "handover"))?.holders[0]?.ownerId).toBe("waiter");
  });

  it("a lock that expired or was released normally is reported lost, not revoked", async () => {
    fresh();
    const holder = await open("holder", 300);
    await take(holder, "plain");
    await sleep(600);
    expect(await holder.keepAlive()).toEqual({ lostKeys: ["plain"] });
  });

  it("a forced release of a permit grant frees that grant alone: the waiter fits, the session's other permits live on", async () => {
    fresh();
    const holder = await open("holder", 20_000);
    const waiter = await open("waiter", 20_000);
    const operator = await open("operator");
    const first = await holder.acquirePermits("pool", semaphorePermits(2, 1, { wait: false }));
    const second = await holder.acquirePermits("pool", semaphorePermits(2, 1, { wait: false }));
    if (first === null || second === null) throw new Error("no permits");
    const waiting = waiter.acquirePermits("pool", semaphorePermits(2, 1, { wait: true }));
    await sleep(200);
    expect(
      await operator.forceRelease("permit", "pool", { token: 1n, reason: "none", signal: never }),
    ).toBe(false);
    expect(
      await operator.forceRelease("permit", "pool", {
        token: first.token,
        reason: "hung worker",
        signal: never,
      }),
    ).toBe(true);
    const got = await within(waiting, 5_000);
    expect(got).not.toBe("pending");
    expect((got as Grant).token).toBeGreaterThan(second.token);
    expect(await holder.keepAlive()).toEqual({
      revoked: [{ space: "permit", key: "pool", token: first.token, reason: "hung worker" }],
    });
    expect(await holder.keepAlive()).toBeUndefined();
    const state = await operator.inspectKey("permit", "pool");
    expect(state?.holders.map((h) => [h.ownerId, h.token])).toEqual([
      ["holder", second.token],
      ["waiter", (got as Grant).token],
    ]);
    // The last grant of a session on a key, force-released: the session lives on.
    expect(
      await operator.forceRelease("permit", "pool", {
        token: second.token,
        reason: "also hung",
        signal: never,
      }),
    ).toBe(true);
    expect(await holder.keepAlive()).toEqual({
      revoked: [{ space: "permit", key: "pool", token: second.token, reason: "also hung" }],
    });
    expect(await holder.release(second)).toBe(false);
    const again = await holder.acquirePermits("pool", semaphorePermits(2, 1, { wait: false }));
    expect(again).not.toBeNull();
  });

  it("an acquire on a permit key between a forced release there and the holder's renewal does not end the session", async () => {
    fresh();
    const holder = await open("holder", 20_000);
    const operator = await open("operator");
    const first = await holder.acquirePermits("pool2", semaphorePermits(3, 1, { wait: false }));
    if (first === null) throw new Error("no permit");
    expect(
      await operator.forceRelease("permit", "pool2", {
        token: first.token,
        reason: "hung",
        signal: never,
      }),
    ).toBe(true);
    // The store has no entry of this session there any more, while it still counts one.
    const second = await holder.acquirePermits("pool2", semaphorePermits(3, 1, { wait: false }));
    expect(second).not.toBeNull();
    expect(await holder.keepAlive()).toEqual({
      revoked: [{ space: "permit", key: "pool2", token: first.token, reason: "hung" }],
    });
    expect(await holder.keepAlive()).toBeUndefined();
    expect((await operator.inspectKey("permit", "pool2"))?.holders.map((h) => h.token)).toEqual([
      second?.token,
    ]);
  });

  it("through the coordinator: list and inspect show the holder, forceRelease aborts its lock as revoked with the reason, the waiter takes it", async () => {
    fresh();
    const holder = createCoordinator({
      backend,
      closeBackend: false,
      ttlMs: 3_000,
      ownerId: "worker-1",
    });
    const waiter = createCoordinator({
      backend,
      closeBackend: false,
      ttlMs: 3_000,
      ownerId: "worker-2",
    });
    const ops = createCoordinator({ backend, closeBackend: false, ttlMs: 3_000, ownerId: "ops" });
    closers.push(
      () => holder.close(),
      () => waiter.close(),
      () => ops.close(),
    );
    const lock = await holder.acquire("billing/invoices");
    const next = waiter.acquire("billing/invoices");
    await sleep(200);
    const listed = [];
    for await (const item of ops.list({ prefix: "billing/" })) listed.push(item);
    expect(listed).toEqual([
      expect.objectContaining({
        kind: "lock",
        name: "billing/invoices",
        holders: [expect.objectContaining({ ownerId: "worker-1", token: lock.token })],
        waiters: { count: 1, ownerIds: ["worker-2"] },
      }),
    ]);
    const result = await ops.forceRelease("billing/invoices", { reason: "stuck on a dead socket" });
    expect(result).toMatchObject({ released: true, token: lock.token });
    const taken = await next;
    expect(taken.token).toBeGreaterThan(lock.token);
    // Within one renewal interval (a third of the TTL), with generous room.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the holder never learned")), 5_000);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      if (lock.signal.aborted) done();
      else lock.signal.addEventListener("abort", done, { once: true });
    });
    const reason = lock.signal.reason as LockLostError;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(reason.reason).toBe("revoked");
    expect(reason.detail).toBe("stuck on a dead socket");
    expect((await ops.inspect("billing/invoices"))?.holders[0]?.ownerId).toBe("worker-2");
    await taken.release();
  });
}

describeBackend("redis", (url) => {
  describe("redis inspection (one node)", () => {
    let raw: Redis;
    beforeAll(async () => {
      raw = new Redis(url, { lazyConnect: true });
      await raw.connect();
    });
    afterAll(() => raw.disconnect());
    inspectionTests(() => ({
      cluster: false,
      backend: (keyPrefix) => new RedisBackend({ url, keyPrefix }),
      nodeRedis: (major) => nodeRedisClient(major, url),
      raw: () => raw,
    }));
  });

  describe("redis inspection (Cluster)", () => {
    let cluster: ServerGroup | undefined;
    let dir: string | undefined;
    let raw: Cluster;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "baton-redis-inspection-"));
      cluster = await startRedisCluster({ dir });
      raw = new Cluster(announced(cluster));
    });
    afterAll(async () => {
      raw?.disconnect();
      await cluster?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });
    inspectionTests(() => ({
      cluster: true,
      backend: (keyPrefix) =>
        new RedisBackend({ url: (cluster as ServerGroup).url, keyPrefix, commandTimeoutMs: 5_000 }),
      nodeRedis: (major) =>
        nodeRedisCluster(
          major,
          announced(cluster as ServerGroup).map((n) => `${n.host}:${n.port}`),
        ),
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
