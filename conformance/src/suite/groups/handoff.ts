import { describe, expect, it } from "vitest";
import { delay, type SuiteContext } from "../suite-context.js";

/** A waiter gets the lock soon after a release, long before the lease would have run out. */
export function handoffGroup(ctx: SuiteContext): void {
  describe("handoff", () => {
    it("a waiter holds the lock soon after the holder releases, not after the TTL", async () => {
      const longTtl = Math.max(20_000, ctx.target.ttlMs * 10);
      const a = ctx.coordinator({ ttlMs: longTtl });
      const b = ctx.coordinator({ ttlMs: longTtl });
      const name = ctx.name("handoff");
      const held = await a.acquire(name);
      const waiting = b.acquire(name, { waitMs: longTtl });
      await delay(200);
      const releasedAt = performance.now();
      await held.release();
      const next = await waiting;
      const handoffMs = performance.now() - releasedAt;
      expect(next.held).toBe(true);
      // Generous bound for noisy machines; far below the TTL, so the release woke the waiter.
      expect(handoffMs).toBeLessThan(Math.min(3_000, longTtl / 4));
    });
  });
}
