import { randomUUID } from "node:crypto";
import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator, parseBackendUrl } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import { dynamodbOptionsFromUrl } from "../src/dynamodb-options.js";
import { DynamoDBBackend } from "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

const backendAt = (url: string) =>
  new DynamoDBBackend(dynamodbOptionsFromUrl(parseBackendUrl(url)));

describeBackend("dynamodb", (url) => {
  it("a release whose keep-alive connection is reset before the store sees it is sent again: it resolves true and the name is free at once", async () => {
    const target = new URL(url.replace(/^dynamodb:/, "http:"));
    const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port) });
    cleanups.push(() => proxy.close());
    const holder = createCoordinator({
      backend: backendAt(url.replace(`:${target.port}/`, `:${proxy.port}/`)),
      ttlMs: 10_000,
    });
    cleanups.push(() => holder.close());
    const other = createCoordinator({ backend: backendAt(url), ttlMs: 10_000 });
    cleanups.push(() => other.close());

    const name = `reset-${randomUUID()}`;
    const lock = await holder.acquire(name);
    proxy.resetNextRequest();
    expect(await lock.release()).toBe(true);
    // The release met the reset (no renewal is due this early in a 10 s lease).
    expect(proxy.requestsReset).toBe(1);
    // Freed in the store, not left to expire: another process takes it at once.
    const next = await other.tryAcquire(name);
    expect(next).not.toBeNull();
    await next?.release();
  });
});
