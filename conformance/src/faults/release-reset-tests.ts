import { randomUUID } from "node:crypto";
import { createCoordinator, type LockBackend } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import { TcpProxy } from "./tcp-proxy.js";

/** What {@link releaseResetTests} needs of an adapter. */
export interface ReleaseResetTarget {
  /** The backend's URL: its host and port are the server's (`scheme://[user@]host:port/...`). */
  readonly url: string;
  /** A backend from a URL of the same form. */
  createBackend(url: string): LockBackend;
}

/**
 * Registers, with vitest, the test every backend that talks to its store over short requests
 * (HTTP) owes a reset connection: a release whose connection is reset before the store sees it
 * (what a client meets when it reuses a keep-alive socket the server has just closed) is sent
 * again, resolves `true`, and frees the name in the store at once, not when the lease ends.
 * Call it inside the `describeBackend` block that gives `url`.
 *
 * @example
 * describeBackend("dynamodb", (url) => {
 *   releaseResetTests({ url, createBackend: (u) => new DynamoDBBackend(optionsFrom(u)) });
 * });
 */
export function releaseResetTests(target: ReleaseResetTarget): void {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });

  it("a release whose keep-alive connection is reset before the store sees it is sent again: it resolves true and the name is free at once", async () => {
    const server = new URL(target.url);
    const proxy = await TcpProxy.start({ host: server.hostname, port: Number(server.port) });
    cleanups.push(() => proxy.close());
    const proxied = new URL(target.url);
    proxied.port = String(proxy.port);
    const holder = createCoordinator({
      backend: target.createBackend(proxied.toString()),
      ttlMs: 10_000,
    });
    cleanups.push(() => holder.close());
    const other = createCoordinator({ backend: target.createBackend(target.url), ttlMs: 10_000 });
    cleanups.push(() => other.close());

    const name = `reset-${randomUUID()}`;
    const lock = await holder.acquire(name);
    proxy.resetNextRequest();
    expect(await lock.release()).toBe(true);
    // The release met the reset (no renewal is due this early in a 10 s lease).
    expect(proxy.requestsReset).toBe(1);
    // Freed in the store, not left to expire: another coordinator takes it at once.
    const next = await other.tryAcquire(name);
    expect(next).not.toBeNull();
    await next?.release();
  });
}
