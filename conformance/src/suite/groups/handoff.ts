import { describe, expect, it } from "vitest";
import { skipUnless } from "../skip-unless.js";
import { delay, type SuiteContext } from "../suite-context.js";

/**
 * A waiter gets the lock soon after a release, long before the lease would have run out; where
 * the store wakes its waiters (`wokenWaiters`: no FIFO, `waiters: "woken"`), two coordinators
 * taking turns at one name hand it over in milliseconds.
 */
export function handoffGroup(ctx: SuiteContext, wokenWaiters: boolean): void {
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

    skipUnless(
      wokenWaiters,
      `${ctx.target.name} does not declare waiters woken by the store on a backend without FIFO`,
      () => {
        it("two coordinators taking turns at one name hand it over in ms, evenly", async () => {
          const ttlMs = Math.max(15_000, ctx.target.ttlMs);
          const pair = [ctx.coordinator({ ttlMs }), ctx.coordinator({ ttlMs })];
          const name = ctx.name("turns");
          const grants = [0, 0];
          const until = performance.now() + 4_000;
          await Promise.all(
            pair.map(async (c, i) => {
              while (performance.now() < until) {
                const lock = await c.acquire(name, { waitMs: 10_000 });
                grants[i] = (grants[i] as number) + 1;
                await delay(2);
                await lock.release();
                await delay(1);
              }
            }),
          );
          // A coordinator that asks again right after its release holds off a few ms, not a poll's
          // window (250 ms at this TTL: about 8 grants a second between the two).
          const [first = 0, second = 0] = grants;
          const total = first + second;
          expect(total).toBeGreaterThan(60);
          expect(Math.min(first, second)).toBeGreaterThan(total / 4);
        });
      },
    );
  });
}
