import { describe, expect, it } from "vitest";
import { delay, type SuiteContext } from "../suite-context.js";

/** Waiters are granted in the order they queued (backends that declare `fifo`). */
export function fifoGroup(ctx: SuiteContext): void {
  describe("FIFO waiting", () => {
    it("10 queued waiters acquire in the order they queued", async () => {
      const name = ctx.name("fifo");
      const holder = ctx.coordinator();
      const first = await holder.acquire(name);
      const order: number[] = [];
      const waiters: Promise<void>[] = [];
      for (let i = 0; i < 10; i++) {
        const c = ctx.coordinator({ ownerId: `waiter-${i}` });
        waiters.push(
          c.withLock(
            name,
            async () => {
              order.push(i);
            },
            { waitMs: 60_000 },
          ),
        );
        // Let this waiter reach the store's queue before the next one starts.
        await delay(150);
      }
      await first.release();
      await Promise.all(waiters);
      expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });
  });
}
