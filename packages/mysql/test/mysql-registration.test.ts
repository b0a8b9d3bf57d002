import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import "../src/index.js";

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
