import { MemoryFence, StaleTokenError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { delay, type SuiteContext } from "../suite-context.js";

/** N contenders x M critical sections: zero overlaps, zero stale writes accepted by a fence. */
export function exclusionGroup(ctx: SuiteContext): void {
  const contenders = ctx.target.contenders ?? 8;
  const sections = ctx.target.sectionsPerContender ?? 50;
  describe("mutual exclusion", () => {
    it(`${contenders} contenders x ${sections} critical sections never overlap and no stale write is accepted`, async () => {
      const name = ctx.name("exclusion");
      const fenced = ctx.backend.guarantees.fencing !== "none";
      const fence = new MemoryFence();
      let inside = 0;
      let overlaps = 0;
      let staleRejected = 0;
      let writes = 0;
      const ledger: bigint[] = [];
      const run = async (index: number) => {
        const coordinator = ctx.coordinator({ ownerId: `contender-${index}` });
        for (let i = 0; i < sections; i++) {
          await coordinator.withLock(
            name,
            async (context) => {
              inside++;
              if (inside > 1) overlaps++;
              // Yield inside the critical section so an overlap would have a chance to show.
              await delay(0);
              if (fenced) {
                try {
                  const token = context.token;
                  await fence.write(name, token, () => {
                    ledger.push(token);
                  });
                  writes++;
                } catch (error) {
                  if (error instanceof StaleTokenError) staleRejected++;
                  else throw error;
                }
              } else writes++;
              inside--;
            },
            { waitMs: 120_000 },
          );
        }
      };
      await Promise.all(Array.from({ length: contenders }, (_, i) => run(i)));
      expect(overlaps).toBe(0);
      expect(staleRejected).toBe(0);
      expect(writes).toBe(contenders * sections);
      if (fenced) {
        // The fence saw non-decreasing tokens, in the order the writes happened.
        for (let i = 1; i < ledger.length; i++) {
          expect((ledger[i] as bigint) >= (ledger[i - 1] as bigint)).toBe(true);
        }
      }
    });
  });
}
