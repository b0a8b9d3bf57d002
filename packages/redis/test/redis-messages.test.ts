import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { BackendUnavailableError, createCoordinator } from "@baton/core";
import { Redis } from "ioredis";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { RedisBackend, RedlockBackend } from "../src/index.js";

const USER = "baton-messages-test";
const signal = new AbortController().signal;
const PASSWORD = "s3cret-Messages";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

const hostsOf = (url: string) =>
  (url.replace(/^[a-z]+:\/\//, "").split("?")[0] as string).split(",").map((a) => {
    const [host, port] = a.split(":");
    return { host: host as string, port: Number(port) };
  });

/** An ACL user with `PASSWORD` on every node, so the URLs carry a secret that must not leak. */
async function addUser(nodes: readonly { host: string; port: number }[]): Promise<void> {
  for (const node of nodes) {
    const admin = new Redis({ ...node, lazyConnect: true });
    try {
      await admin.connect();
      await admin.call("ACL", "SETUSER", USER, "reset", "on", `>${PASSWORD}`, "~*", "&*", "+@all");
    } finally {
      admin.disconnect();
    }
  }
}

/** The error `promise` rejects with. */
async function failure(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BackendUnavailableError);
  return error as Error;
}

describeBackend("redis", (url) => {
  describe("errors name the host, never the password", () => {
    beforeAll(() => addUser(hostsOf(url)));

    it("renewal, acquire, holder and release failures of one node", async () => {
      const [target] = hostsOf(url);
      const proxy = await TcpProxy.start(target as { host: string; port: number });
      cleanups.push(() => proxy.close());
      const host = `127.0.0.1:${proxy.port}`;
      const backend = new RedisBackend({
        url: `redis://${USER}:${PASSWORD}@${host}?prefix=messages:&commandTimeoutMs=500`,
      });
      cleanups.push(() => backend.close());
      const session = await backend.openSession({ ttlMs: 5_000, ownerId: "messages" });
      const name = `messages-${Date.now()}`;
      const grant = await session.acquire(name, { wait: false, signal });
      expect(grant).not.toBeNull();
      proxy.cut();
      const errors = [
        await failure(session.keepAlive()),
        await failure(session.acquire(`${name}-2`, { wait: false, signal })),
        await failure(session.holder(name)),
        await failure(session.release(grant as NonNullable<typeof grant>)),
      ];
      for (const error of errors) {
        expect(error.message).toContain(`redis ${host}: `);
        expect(error.message).not.toContain(PASSWORD);
      }
      expect(errors[0]?.message).toMatch(new RegExp(`^redis ${host}: renewal`));
    });

    it("the logger's line for a failed renewal names the host", async () => {
      const [target] = hostsOf(url);
      const proxy = await TcpProxy.start(target as { host: string; port: number });
      cleanups.push(() => proxy.close());
      const host = `127.0.0.1:${proxy.port}`;
      const lines: string[] = [];
      // The logger gets the error as its details.
      const log = (message: string, details?: unknown) => {
        lines.push(details instanceof Error ? `${message}: ${details.message}` : message);
      };
      const coordinator = createCoordinator({
        url: `redis://${USER}:${PASSWORD}@${host}?prefix=messages:&commandTimeoutMs=300`,
        ttlMs: 3_000,
        logger: { warn: log, error: log },
      });
      cleanups.push(() => coordinator.close());
      const renewFailures: string[] = [];
      coordinator.on("renewFailed", ({ error }) => renewFailures.push(String(error)));
      const lock = await coordinator.acquire(`logged-${Date.now()}`);
      proxy.cut();
      await new Promise<void>((resolve) =>
        lock.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      expect(renewFailures.length).toBeGreaterThan(0);
      for (const line of renewFailures) expect(line).toContain(`redis ${host}: renewal`);
      expect(lines.some((l) => l.includes(`redis ${host}`))).toBe(true);
      for (const line of [...lines, ...renewFailures]) expect(line).not.toContain(PASSWORD);
    }, 20_000);
  });
});

describeBackend("redlock", (url) => {
  describe("errors name the nodes, never the password", () => {
    beforeAll(() => addUser(hostsOf(url)));

    it("renewal, acquire, holder and release failures name each failed node", async () => {
      const proxies = await Promise.all(hostsOf(url).map((n) => TcpProxy.start(n)));
      cleanups.push(() => Promise.all(proxies.map((p) => p.close())));
      const hosts = proxies.map((p) => `127.0.0.1:${p.port}`);
      const backend = new RedlockBackend({
        url: `redlock://${USER}:${PASSWORD}@${hosts.join(",")}?prefix=messages:&nodeTimeoutMs=300`,
      });
      cleanups.push(() => backend.close());
      const session = await backend.openSession({ ttlMs: 5_000, ownerId: "messages" });
      const name = `messages-${Date.now()}`;
      const grant = await session.acquire(name, { wait: false, signal });
      expect(grant).not.toBeNull();
      for (const proxy of proxies) proxy.cut();
      const errors = [
        await failure(session.keepAlive()),
        await failure(session.acquire(`${name}-2`, { wait: false, signal })),
        await failure(session.holder(name)),
        await failure(session.release(grant as NonNullable<typeof grant>)),
      ];
      for (const error of errors) {
        // An acquire round ends once too many failed for a quorum: those are named.
        const named = hosts.filter((h) => error.message.includes(`node ${h}: `));
        expect(named.length).toBeGreaterThanOrEqual(hosts.length - backend.quorum + 1);
        expect(error.message).not.toContain(PASSWORD);
      }
      // A renewal waits for every node: each is named.
      for (const host of hosts) expect(errors[0]?.message).toContain(`node ${host}: `);
    });
  });
});
