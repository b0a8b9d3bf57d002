import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  describeBackend,
  freePort,
  type ServerGroup,
  startRedisNodes,
} from "@baton/conformance/harness";
import {
  AuthenticationError,
  BackendUnavailableError,
  ConfigError,
  type Coordinator,
  createCoordinator,
} from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";
import {
  closeNodeRedis,
  NODE_REDIS,
  type NodeRedisMajor,
  nodeRedisClient,
  type TestNodeRedis,
} from "./node-redis-clients.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

const prefix = `nr-${process.pid}-`;
const MAJORS = Object.keys(NODE_REDIS) as NodeRedisMajor[];

/** A coordinator on a backend on `client`, both closed after the test (the client is not). */
function coordinatorOn(client: TestNodeRedis, ttlMs = 3_000): Coordinator {
  const backend = new RedisBackend({ client, keyPrefix: `baton-nr:` });
  const coordinator = createCoordinator({ backend, ttlMs });
  cleanups.push(() => backend.close());
  cleanups.push(() => coordinator.close());
  return coordinator;
}

/** The server's connections named `name` (`CLIENT LIST`). */
async function connections(address: string, name: string): Promise<number> {
  const [host, port] = address.split(":");
  const admin = new Redis({ host: host as string, port: Number(port) });
  try {
    const list = (await admin.client("LIST")) as string;
    return list.split("\n").filter((line) => line.includes(` name=${name} `)).length;
  } finally {
    admin.disconnect();
  }
}

describeBackend("redis", (url) => {
  const address = url.replace(/^redis:\/\//, "").split("/")[0] as string;

  // The RESP3 and type-mapping options exist from node-redis 5 on.
  const variants: [NodeRedisMajor, string, Record<string, unknown>][] = [
    ...MAJORS.map((m): [NodeRedisMajor, string, Record<string, unknown>] => [m, "", {}]),
    ["node-redis 5", " over RESP3", { RESP: 3 }],
    ["node-redis 6", " over RESP3", { RESP: 3 }],
    [
      "node-redis 6",
      " whose replies are mapped to Buffers",
      { RESP: 3, commandOptions: { typeMapping: { 36: Buffer, 43: Buffer } } },
    ],
  ];

  describe.each(variants)("an app's own %s client%s", (major, _title, options) => {
    const client = async () => {
      const c = await nodeRedisClient(major, address, options);
      cleanups.push(() => closeNodeRedis(c));
      return c;
    };

    it("locks, fences, reads the holder and hands a released lock to a waiter through its release message", async () => {
      const c = await client();
      const a = coordinatorOn(c, 30_000);
      const b = coordinatorOn(c, 30_000);
      const name = `${prefix}${major}-${Object.keys(options).join()}-handoff`;
      const first = await a.acquire(name);
      expect(await b.tryAcquire(name)).toBeNull();
      expect(await b.holder(name)).toMatchObject({ ownerId: a.ownerId, token: first.token });
      const waiting = b.acquire(name, { waitMs: 20_000 });
      await new Promise((r) => setTimeout(r, 200));
      const releasedAt = performance.now();
      expect(await first.release()).toBe(true);
      const second = await waiting;
      // Woken by the release, not by the 30 s lease running out.
      expect(performance.now() - releasedAt).toBeLessThan(15_000);
      expect(second.token).toBeGreaterThan(first.token as bigint);
      expect(await second.release()).toBe(true);
    });

    it("runs a job once per slot on its records, and shares a semaphore's permits", async () => {
      const c = await client();
      const a = coordinatorOn(c);
      const b = coordinatorOn(c);
      const job = `${prefix}${major}-${Object.keys(options).join()}-job-${Date.now()}`;
      let runs = 0;
      const first = await a.runOnce(job, "slot-1", () => ++runs);
      const second = await b.runOnce(job, "slot-1", () => ++runs);
      expect(first.outcome).toBe("ran");
      expect(second.outcome).toBe("already-done");
      expect(runs).toBe(1);
      const sa = a.semaphore(`${job}-sem`, { permits: 2 });
      const sb = b.semaphore(`${job}-sem`, { permits: 2 });
      const p1 = await sa.acquire();
      const p2 = await sb.acquire();
      expect(await sb.tryAcquire()).toBeNull();
      await p1.release();
      const p3 = await sb.acquire({ waitMs: 10_000 });
      await p2.release();
      await p3.release();
    });
  });

  it.each(MAJORS)(
    "%s: the backend connects a client that is not open, closes only its own subscriber, and leaves the app's client open",
    async (major) => {
      const create = NODE_REDIS[major].createClient as (o: object) => TestNodeRedis;
      // Named, so that its connections (and its duplicate's) can be told from others'.
      const clientName = `baton-nr-${process.pid}-${major.replace(/\W/g, "")}`;
      const c = create({ url: `redis://${address}`, name: clientName });
      c.on("error", () => undefined);
      cleanups.push(() => closeNodeRedis(c));
      const count = () => connections(address, clientName);
      const events = c as unknown as { listenerCount(event: string): number };
      const listeners = () => ["ready", "error", "end"].map((e) => events.listenerCount(e));
      const before = listeners();
      const backend = new RedisBackend({ client: c });
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      const other = createCoordinator({ backend, ttlMs: 3_000 });
      const name = `${prefix}${major}-open`;
      const held = await coordinator.acquire(name);
      // A waiter makes the backend open its subscriber.
      const waiting = other.acquire(name, { waitMs: 10_000 });
      expect(c.isOpen).toBe(true);
      // Baton listened on the app's client only while it waited for it to be ready.
      expect(listeners()).toEqual(before);
      await expect.poll(count, { timeout: 10_000 }).toBe(2);
      await held.release();
      await (await waiting).release();
      await coordinator.close();
      await other.close();
      await backend.close();
      expect(c.isOpen).toBe(true);
      await expect.poll(count, { timeout: 10_000 }).toBe(1);
    },
  );

  it.each(MAJORS)(
    "%s: a client that cannot connect fails with BackendUnavailableError naming the address",
    async (major) => {
      const port = await freePort();
      const create = NODE_REDIS[major].createClient as (o: object) => TestNodeRedis;
      const c = create({ url: `redis://127.0.0.1:${port}` });
      c.on("error", () => undefined);
      cleanups.push(() => closeNodeRedis(c));
      const backend = new RedisBackend({ client: c, commandTimeoutMs: 1_000 });
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      cleanups.push(() => coordinator.close());
      const error = await coordinator.acquire("unreachable", { waitMs: 3_000 }).catch((e) => e);
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(`127.0.0.1:${port}`);
    },
  );

  describe("a server with requirepass", () => {
    const RIGHT = "right-Pa55word";
    const WRONG = "wrong-Pa55word";
    let server: ServerGroup | undefined;
    let dir: string | undefined;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "baton-node-redis-auth-"));
      server = await startRedisNodes({ kind: "redis", dir });
      const [host, port] = (server.url.replace(/^redis:\/\//, "") as string).split(":");
      const admin = new Redis({ host: host as string, port: Number(port) });
      await admin.config("SET", "requirepass", RIGHT);
      admin.disconnect();
    });
    afterAll(async () => {
      await server?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it.each(MAJORS)(
      "%s: a wrong password rejects at once with AuthenticationError naming `client`",
      async (major) => {
        const where = (server as ServerGroup).url.replace(/^redis:\/\//, "");
        const create = NODE_REDIS[major].createClient as (o: object) => TestNodeRedis;
        const c = create({ url: `redis://:${WRONG}@${where}` });
        c.on("error", () => undefined);
        cleanups.push(() => closeNodeRedis(c));
        const backend = new RedisBackend({ client: c, commandTimeoutMs: 5_000 });
        cleanups.push(() => backend.close());
        const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
        cleanups.push(() => coordinator.close());
        const start = performance.now();
        const error = await coordinator.acquire("auth", { waitMs: 20_000 }).catch((e) => e);
        expect(error).toBeInstanceOf(AuthenticationError);
        expect((error as AuthenticationError).field).toBe("client");
        expect((error as Error).message).toContain(where);
        expect((error as Error).message).not.toContain(WRONG);
        // Not retried until the 5 s connection bound, let alone waitMs.
        expect(performance.now() - start).toBeLessThan(4_500);
      },
    );
  });

  it("refuses a node-redis 4 client in legacy mode naming `client` before any I/O, and works with one duplicated without legacy mode", async () => {
    const create = NODE_REDIS["node-redis 4"].createClient as (o: object) => TestNodeRedis & {
      v4: unknown;
      duplicate(overrides: object): TestNodeRedis;
    };
    // Not connected: the refusal needs no server.
    const legacy = create({ url: `redis://${address}`, legacyMode: true });
    const refused = (make: () => unknown) => {
      let error: unknown;
      let built: unknown;
      try {
        built = make();
      } catch (e) {
        error = e;
      }
      // A backend built on the legacy client is closed, so nothing is left behind.
      if (built instanceof RedisBackend || built instanceof RedlockBackend) {
        const backend = built;
        cleanups.push(() => backend.close());
      }
      return error;
    };
    const single = refused(() => new RedisBackend({ client: legacy }));
    expect(single).toBeInstanceOf(ConfigError);
    expect((single as ConfigError).field).toBe("client");
    expect((single as Error).message).toContain("legacyMode");
    expect((single as Error).message).toContain("duplicate({ legacyMode: false })");
    const redlock = refused(() => new RedlockBackend({ clients: [legacy, legacy, legacy] }));
    expect(redlock).toBeInstanceOf(ConfigError);
    expect((redlock as ConfigError).field).toBe("clients");
    expect((redlock as Error).message).toContain("legacyMode");
    // Its `v4` commands alone are no client: nothing to connect or listen on.
    expect(refused(() => new RedisBackend({ client: legacy.v4 as never }))).toMatchObject({
      field: "client",
      code: "BATON_CONFIG",
    });

    // What the message says to pass: a client duplicated without legacy mode, which Baton
    // connects itself.
    const plain = legacy.duplicate({ legacyMode: false });
    plain.on("error", () => undefined);
    cleanups.push(() => closeNodeRedis(plain));
    const a = coordinatorOn(plain, 30_000);
    const b = coordinatorOn(plain, 30_000);
    const name = `${prefix}legacy-duplicate`;
    const first = await a.acquire(name, { waitMs: 10_000 });
    const waiting = b.acquire(name, { waitMs: 20_000 });
    await new Promise((r) => setTimeout(r, 200));
    expect(await first.release()).toBe(true);
    const second = await waiting;
    expect(second.token).toBeGreaterThan(first.token as bigint);
    expect(await second.release()).toBe(true);
    let runs = 0;
    const job = `${prefix}legacy-duplicate-job-${Date.now()}`;
    expect((await a.runOnce(job, "slot-1", () => ++runs)).outcome).toBe("ran");
    expect((await b.runOnce(job, "slot-1", () => ++runs)).outcome).toBe("already-done");
    expect(runs).toBe(1);
  });

  it("tells a node-redis client from an ioredis one by shape, and refuses anything else naming `client`", () => {
    const c = NODE_REDIS["node-redis 6"].createClient({ url: `redis://${address}` });
    expect(new RedisBackend({ client: c }).client).toBe(c);
    for (const bad of [{}, { evalSha: () => undefined }, { isOpen: false }]) {
      expect(() => new RedisBackend({ client: bad as never })).toThrow(
        expect.objectContaining({ field: "client", code: "BATON_CONFIG" }),
      );
    }
  });
});

describeBackend("redlock", (url) => {
  it("Redlock over an app's own node-redis clients, one per node (node-redis 4, 5 and 6), excludes a URL-built Redlock and releases on every node", async () => {
    const hosts = (url.replace(/^redlock:\/\//, "").split("?")[0] as string).split(",");
    const clients = await Promise.all(
      hosts.map((h, i) => nodeRedisClient(MAJORS[i % MAJORS.length] as NodeRedisMajor, h)),
    );
    for (const c of clients) cleanups.push(() => closeNodeRedis(c));
    const own = new RedlockBackend({ clients, keyPrefix: "nr-redlock:" });
    expect(own.nodes).toEqual(clients);
    expect(own.endpoint).toBe(hosts.join(", "));
    const byUrl = new RedlockBackend({ url, keyPrefix: "nr-redlock:" });
    cleanups.push(() => own.close());
    cleanups.push(() => byUrl.close());
    const a = createCoordinator({ backend: own, ttlMs: 3_000 });
    const b = createCoordinator({ backend: byUrl, ttlMs: 3_000 });
    cleanups.push(() => a.close());
    cleanups.push(() => b.close());
    const name = `${prefix}redlock`;
    const lock = await a.acquire(name);
    expect(await b.tryAcquire(name)).toBeNull();
    expect(await b.holder(name)).toMatchObject({ ownerId: a.ownerId });
    await new Promise((r) => setTimeout(r, 1_500)); // a renewal on every node
    expect(lock.held).toBe(true);
    expect(await lock.release()).toBe(true);
    const next = await b.tryAcquire(name);
    expect(next).not.toBeNull();
    expect(await a.tryAcquire(name)).toBeNull();
    await next?.release();
  });
});
