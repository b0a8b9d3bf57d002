import { describe, expect, it } from "vitest";
import type { SuiteContext } from "../suite-context.js";

/** Fencing tokens strictly increase over successive grants, including grants after expiry. */
export function tokensGroup(ctx: SuiteContext): void {
  describe("fencing tokens", () => {
    it("strictly increase over 100 successive grants by 3 owners, 3 of them after an expiry", async () => {
      const ttl = ctx.target.ttlMs;
      const owners = [ctx.coordinator(), ctx.coordinator(), ctx.coordinator()];
      const name = ctx.name("tokens");
      const tokens: bigint[] = [];
      for (let i = 0; i < 100; i++) {
        if (i === 10 || i === 50 || i === 90) {
          // A frozen holder takes a grant and lets it expire; the next grant comes after expiry.
          const frozen = await ctx.frozenHolder(name);
          tokens.push(frozen.grant.token);
          const owner = owners[i % 3];
          const lock = await owner?.acquire(name, { waitMs: ttl * 4 + 5_000 });
          if (lock === undefined) throw new Error("unreachable");
          tokens.push(lock.token);
          await lock.release();
          i++;
          continue;
        }
        const owner = owners[i % 3];
        const lock = await owner?.acquire(name, { waitMs: 10_000 });
        if (lock === undefined) throw new Error("unreachable");
        tokens.push(lock.token);
        await lock.release();
      }
      expect(tokens.length).toBeGreaterThanOrEqual(100);
      for (let i = 1; i < tokens.length; i++) {
        const prev = tokens[i - 1] as bigint;
        const next = tokens[i] as bigint;
        if (next <= prev) {
          throw new Error(`token ${i} (${next}) is not greater than token ${i - 1} (${prev})`);
        }
      }
    });
  });
}
