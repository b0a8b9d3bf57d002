import { randomUUID } from "node:crypto";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { BackendUnavailableError } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

/**
 * A session opened through a proxy that then stops answering: the failure of its next
 * statement names the server it was sent to (the proxy's port), never the password.
 */
async function checkNamed(url: string): Promise<string> {
  const target = new URL(url);
  const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port) });
  closers.push(() => proxy.close());
  const proxied = new URL(url);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(proxy.port);
  proxied.password = "secret-password";
  const backend = new PostgresBackend({ url: proxied.toString() });
  closers.push(() => backend.close());
  const session = await backend.openSession({ ttlMs: 2_000, ownerId: "where" });
  const signal = new AbortController().signal;
  expect(await session.acquire(`warm-${randomUUID()}`, { wait: false, signal })).not.toBeNull();
  proxy.blackhole();
  const error = await session.keepAlive().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BackendUnavailableError);
  const message = (error as Error).message;
  expect(message).toContain(`127.0.0.1:${proxy.port}/`);
  expect(message).not.toContain("secret-password");
  return message;
}

describeBackend("postgres", (url) => {
  describe("a statement that fails names the server (advisory locks)", () => {
    it("a renewal with no answer", async () => {
      expect(await checkNamed(url)).toMatch(/^a PostgreSQL renewal at 127\.0\.0\.1:\d+\//);
    }, 30_000);
  });
});

describeBackend("postgres-lease", (url) => {
  describe("a statement that fails names the server (row leases)", () => {
    it("a renewal with no answer", async () => {
      expect(await checkNamed(url)).toMatch(/^a PostgreSQL renew(al)? at 127\.0\.0\.1:\d+\//);
    }, 30_000);
  });
});
