import { describe, expect, it } from "vitest";
import { recordedToken } from "../../history/recorded-token.js";
import type { SuiteContext } from "../suite-context.js";

/** A holder that stops renewing loses the lock; its late release never frees the next holder. */
export function expiryGroup(ctx: SuiteContext): void {
  describe("expiry", () => {
    it("frees the lock of a holder that stops renewing, with a greater token for the next holder", async () => {
      const ttl = ctx.target.ttlMs;
      const name = ctx.name("expiry");
      const frozen = await ctx.frozenHolder(name);
      const b = ctx.coordinator();
      expect(await b.tryAcquire(name)).toBeNull();
      const started = performance.now();
      const lock = await b.acquire(name, { waitMs: ttl * 4 + 5_000 });
      const waited = performance.now() - started;
      expect(waited).toBeLessThan(ttl * 4 + 5_000);
      if (ctx.backend.guarantees.fencing !== "none") {
        expect(lock.token).toBeGreaterThan(frozen.grant.token);
      }
    });

    it("a release by the expired owner never frees the next holder's lock", async () => {
      const ttl = ctx.target.ttlMs;
      const name = ctx.name("late-release");
      const frozen = await ctx.frozenHolder(name);
      const b = ctx.coordinator();
      const lock = await b.acquire(name, { waitMs: ttl * 4 + 5_000 });
      const late = await frozen.session.release(frozen.grant).catch(() => false);
      expect(late).toBe(false);
      expect(lock.held).toBe(true);
      const holder = await b.holder(name);
      expect(holder).toMatchObject({ ownerId: b.ownerId, token: recordedToken(lock) });
      const c = ctx.coordinator();
      expect(await c.tryAcquire(name)).toBeNull();
    });
  });
}
