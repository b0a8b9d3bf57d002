import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import { MysqlBackend } from "../src/index.js";

describeBackend("mysql-lease", (url) => {
  const coordinators: Coordinator[] = [];
  afterEach(async () => {
    await Promise.allSettled(coordinators.splice(0).map((c) => c.close()));
  });

  it("a coordinator built from a row-lease URL lists, inspects and force-releases, also before its first lock", async () => {
    const operator = createCoordinator({ url, ttlMs: 2_000 });
    const holder = createCoordinator({ url, ttlMs: 2_000, ownerId: "holder" });
    coordinators.push(operator, holder);
    const prefix = `registration-${randomUUID().slice(0, 8)}/`;
    const before = [];
    for await (const item of operator.list({ prefix })) before.push(item);
    expect(before).toEqual([]);
    const lock = await holder.acquire(`${prefix}a`);
    const listed = [];
    for await (const item of operator.list({ prefix })) listed.push(item.name);
    expect(listed).toEqual([`${prefix}a`]);
    expect((await operator.inspect(`${prefix}a`))?.holders[0]?.ownerId).toBe("holder");
    expect(await operator.forceRelease(`${prefix}a`, { reason: "test" })).toMatchObject({
      released: true,
    });
    await expect.poll(() => lock.signal.aborted, { timeout: 5_000 }).toBe(true);
  });
});

describeBackend("mysql-lease", (url) => {
  it("closing the backend while a lock is held frees it at once, not after its TTL", async () => {
    const backend = new MysqlBackend({ url });
    const other = createCoordinator({ url, ttlMs: 10_000 });
    try {
      const name = `close-${randomUUID()}`;
      const session = await backend.openSession({ ownerId: "closing", ttlMs: 10_000 });
      const grant = await session.acquire(name, {
        wait: false,
        signal: new AbortController().signal,
      });
      expect(grant).not.toBeNull();
      await backend.close();
      // Without the close statement the lease would stand for its 10 s TTL.
      expect(await other.holder(name)).toBeNull();
      const lock = await other.tryAcquire(name);
      expect(lock?.token).toBeGreaterThan(grant?.token ?? 0n);
      await lock?.release();
    } finally {
      await backend.close();
      await other.close();
    }
  });
});
