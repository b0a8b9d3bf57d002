import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

describeBackend("azure-blob", (url) => {
  it("holder() tells the time left on the holder's lease", async () => {
    const name = `holder-${Date.now()}`;
    const holder = createCoordinator({ url, ttlMs: 3_000 });
    const reader = createCoordinator({ url, ttlMs: 3_000 });
    cleanups.push(
      () => holder.close(),
      () => reader.close(),
    );
    await holder.acquire(name);
    const seen = await reader.holder(name);
    expect(seen?.ownerId).toBe(holder.ownerId);
    expect(seen?.remainingMs).toBeGreaterThan(0);
    expect(seen?.remainingMs).toBeLessThanOrEqual(3_000);
  });
});
