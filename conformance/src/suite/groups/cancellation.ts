import { LockTimeoutError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { delay, type SuiteContext, settle } from "../suite-context.js";

/** A cancelled or timed-out wait leaves nothing behind that would delay later acquirers. */
export function cancellationGroup(ctx: SuiteContext): void {
  describe("cancellation", () => {
    it("an aborted wait rejects with the signal's reason and leaves nothing behind", async () => {
      const name = ctx.name("cancel");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const c = ctx.coordinator();
      const held = await a.acquire(name);
      const controller = new AbortController();
      const waiting = settle(b.acquire(name, { waitMs: 60_000, signal: controller.signal }));
      await delay(300);
      const reason = new Error("caller gave up");
      controller.abort(reason);
      const outcome = await waiting;
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) expect(outcome.error).toBe(reason);
      await delay(100);
      await held.release();
      const next = await c.tryAcquire(name);
      expect(next).not.toBeNull();
      expect(await c.holder(name)).toMatchObject({ ownerId: c.ownerId });
    });

    it("a wait that runs out rejects with LockTimeoutError and leaves nothing behind", async () => {
      const name = ctx.name("timeout");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const c = ctx.coordinator();
      const held = await a.acquire(name);
      const started = performance.now();
      const error = await b.acquire(name, { waitMs: 500 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect((error as LockTimeoutError).waitMs).toBe(500);
      expect(performance.now() - started).toBeGreaterThanOrEqual(450);
      await held.release();
      expect(await c.tryAcquire(name)).not.toBeNull();
    });

    it("an already-aborted signal rejects at once without taking the lock", async () => {
      const name = ctx.name("pre-aborted");
      const a = ctx.coordinator();
      const reason = new Error("already cancelled");
      const error = await a
        .acquire(name, { signal: AbortSignal.abort(reason) })
        .catch((e: unknown) => e);
      expect(error).toBe(reason);
      const b = ctx.coordinator();
      expect(await b.tryAcquire(name)).not.toBeNull();
    });
  });
}
