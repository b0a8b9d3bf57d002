import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, LockLostError } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

/** Through the coordinator: an operator frees a lock another process holds. */
function forceReleaseTest(url: string): void {
  it("coordinator.forceRelease: the holder's lock ends as revoked with the reason, the waiter holds with a greater token", async () => {
    const schema = `force_${randomUUID().slice(0, 8)}`;
    const coordinator = (ownerId: string): Coordinator => {
      const made = createCoordinator({
        backend: new PostgresBackend({ url, schema }),
        ownerId,
        ttlMs: 3_000,
      });
      closers.push(() => made.close());
      return made;
    };
    const [holder, waiter, operator] = [
      coordinator("holder"),
      coordinator("waiter"),
      coordinator("operator"),
    ];
    const name = `stuck-${randomUUID()}`;
    const lock = await holder.acquire(name);
    const waiting = waiter.acquire(name, { waitMs: 20_000 });
    const ended = new Promise<unknown>((resolve) => {
      lock.signal.addEventListener("abort", () => resolve(lock.signal.reason), { once: true });
    });
    const result = await operator.forceRelease(name, { reason: "stuck since the deploy" });
    expect(result.released).toBe(true);
    expect(result.token).toBe(lock.token);
    const reason = await ended;
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("revoked");
    expect((reason as LockLostError).detail).toBe("stuck since the deploy");
    expect(lock.held).toBe(false);
    const next = await waiting;
    expect(next.token).toBeGreaterThan(lock.token);
    expect((await operator.inspect(name))?.holders[0]?.ownerId).toBe("waiter");
    await next.release();
  });
}

describeBackend("postgres", (url) => {
  describe("forced release through the coordinator (advisory locks)", () => {
    forceReleaseTest(url);
  });
});

describeBackend("postgres-lease", (url) => {
  describe("forced release through the coordinator (row leases)", () => {
    forceReleaseTest(url);
  });
});
