import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  describeBackend,
  type ServerGroup,
  startRedisCluster,
  startRedisNodes,
} from "@baton/conformance/harness";
import { AuthenticationError, createCoordinator } from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";

const USER = "baton-auth-test";
const RIGHT = "right-Pa55word";
const WRONG = "wrong-Pa55word";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

/** Adds the ACL user `USER` with password `RIGHT` on every `host:port`. */
async function addUser(addresses: readonly string[]): Promise<void> {
  for (const address of addresses) {
    const [host, port] = address.split(":");
    const admin = new Redis({ host: host as string, port: Number(port), lazyConnect: true });
    try {
      await admin.connect();
      await admin.call("ACL", "SETUSER", USER, "reset", "on", `>${RIGHT}`, "~*", "&*", "+@all");
    } finally {
      admin.disconnect();
    }
  }
}

const hostsOf = (url: string) => url.replace(/^[a-z]+:\/\//, "").split(",");

/**
 * Acquires through a coordinator on `backend`; returns the error and how long it took. The
 * command bound is 5 s, so a refusal seen only when the connection wait runs out takes longer.
 */
async function failedAcquire(backend: RedisBackend | RedlockBackend) {
  cleanups.push(() => backend.close());
  const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
  cleanups.push(() => coordinator.close());
  const start = performance.now();
  const error = await coordinator.acquire("auth", { waitMs: 20_000 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: performance.now() - start };
}

function expectRefused(
  result: { error: unknown; ms: number },
  field: string,
  hosts: readonly string[],
): void {
  expect(result.error).toBeInstanceOf(AuthenticationError);
  const error = result.error as AuthenticationError;
  expect(error.code).toBe("BATON_AUTH");
  expect(error.field).toBe(field);
  expect(hosts.some((h) => error.message.includes(h))).toBe(true);
  expect(error.message).not.toContain(WRONG);
  expect(error.message).not.toContain(RIGHT);
  // Not retried: well before the 5 s connection bound, let alone waitMs.
  expect(result.ms).toBeLessThan(4_000);
}

describeBackend("redis", (url) => {
  describe("refused credentials", () => {
    const hosts = hostsOf(url);
    beforeAll(() => addUser(hosts));

    it("a wrong password for an ACL user rejects at once with AuthenticationError", async () => {
      const backend = new RedisBackend({
        url: `redis://${USER}:${WRONG}@${hosts[0]}?commandTimeoutMs=5000`,
      });
      expectRefused(await failedAcquire(backend), "url", hosts);
    });

    it("the right password works", async () => {
      const backend = new RedisBackend({ url: `redis://${USER}:${RIGHT}@${hosts[0]}` });
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      cleanups.push(() => coordinator.close());
      await (await coordinator.acquire(`auth-ok-${Date.now()}`)).release();
    });

    it("your own client with a wrong password: AuthenticationError naming `client`", async () => {
      const [host, port] = (hosts[0] as string).split(":");
      const client = new Redis({
        host: host as string,
        port: Number(port),
        username: USER,
        password: WRONG,
        lazyConnect: true,
      });
      client.on("error", () => undefined);
      cleanups.push(async () => client.disconnect());
      const backend = new RedisBackend({ client, commandTimeoutMs: 5_000 });
      expectRefused(await failedAcquire(backend), "client", hosts);
    });
  });

  describe("a server with requirepass", () => {
    let server: ServerGroup | undefined;
    let dir: string | undefined;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "baton-redis-auth-"));
      server = await startRedisNodes({ kind: "redis", dir });
      const [host, port] = hostsOf(server.url)[0]?.split(":") ?? [];
      const admin = new Redis({ host: host as string, port: Number(port) });
      await admin.config("SET", "requirepass", RIGHT);
      admin.disconnect();
    });
    afterAll(async () => {
      await server?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });
    const address = () => hostsOf(server?.url ?? "")[0] as string;

    it("a wrong password rejects at once with AuthenticationError", async () => {
      const backend = new RedisBackend({
        url: `redis://:${WRONG}@${address()}?commandTimeoutMs=5000`,
      });
      expectRefused(await failedAcquire(backend), "url", [address()]);
    });

    it("no password rejects at once too", async () => {
      const backend = new RedisBackend({ url: `redis://${address()}?commandTimeoutMs=5000` });
      const result = await failedAcquire(backend);
      expectRefused(result, "url", [address()]);
      expect((result.error as Error).message).toMatch(/NOAUTH/);
    });

    it("the right password works", async () => {
      const backend = new RedisBackend({ url: `redis://:${RIGHT}@${address()}` });
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      cleanups.push(() => coordinator.close());
      await (await coordinator.acquire("auth-ok")).release();
    });
  });

  describe("a Redis Cluster", () => {
    let cluster: ServerGroup | undefined;
    let dir: string | undefined;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "baton-redis-auth-cluster-"));
      cluster = await startRedisCluster({ dir });
      await addUser(hostsOf(cluster.url));
    });
    afterAll(async () => {
      await cluster?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it("a wrong password rejects at once with AuthenticationError naming a node", async () => {
      const hosts = hostsOf(cluster?.url ?? "");
      const backend = new RedisBackend({
        url: `redis://${USER}:${WRONG}@${hosts.join(",")}?commandTimeoutMs=5000`,
      });
      expectRefused(await failedAcquire(backend), "url", hosts);
    });

    it("the right password works", async () => {
      const hosts = hostsOf(cluster?.url ?? "");
      const backend = new RedisBackend({ url: `redis://${USER}:${RIGHT}@${hosts.join(",")}` });
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      cleanups.push(() => coordinator.close());
      await (await coordinator.acquire("auth-ok")).release();
    });
  });
});

describeBackend("redlock", (url) => {
  describe("refused credentials", () => {
    const hosts = hostsOf(url.split("?")[0] as string);
    beforeAll(() => addUser(hosts));

    it("a wrong password rejects at once with AuthenticationError", async () => {
      const backend = new RedlockBackend({
        url: `redlock://${USER}:${WRONG}@${hosts.join(",")}?nodeTimeoutMs=5000`,
      });
      expectRefused(await failedAcquire(backend), "url", hosts);
    });

    it("the right password works", async () => {
      const backend = new RedlockBackend({ url: `redlock://${USER}:${RIGHT}@${hosts.join(",")}` });
      cleanups.push(() => backend.close());
      const coordinator = createCoordinator({ backend, ttlMs: 3_000 });
      cleanups.push(() => coordinator.close());
      await (await coordinator.acquire(`auth-ok-${Date.now()}`)).release();
    });
  });
});
