import { describe, expect, it } from "vitest";
import { recordedToken } from "../../history/recorded-token.js";
import { delay, type SuiteContext } from "../suite-context.js";

/** The keepalive loop keeps a lock for many TTLs. */
export function renewalGroup(ctx: SuiteContext): void {
  describe("renewal", () => {
    it("keeps a lock held for 4 TTLs while another owner is refused throughout", async () => {
      const ttl = ctx.target.ttlMs;
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("renewal");
      let renewals = 0;
      a.on("renewed", () => {
        renewals++;
      });
      const lock = await a.acquire(name);
      for (let i = 0; i < 4; i++) {
        await delay(ttl);
        expect(lock.held).toBe(true);
        expect(await b.tryAcquire(name)).toBeNull();
      }
      expect(renewals).toBeGreaterThanOrEqual(4);
      expect(await a.holder(name)).toMatchObject({
        ownerId: a.ownerId,
        token: recordedToken(lock),
      });
      expect(await lock.release()).toBe(true);
    });
  });
}
