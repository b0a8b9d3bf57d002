import { describe, expect, it } from "vitest";
import type { SuiteContext } from "../suite-context.js";

/** `withLock` returns fn's result, passes signal and token, and always releases. */
export function withLockGroup(ctx: SuiteContext): void {
  describe("withLock", () => {
    it("runs fn under the lock with its token and signal, returns its result, then releases", async () => {
      const name = ctx.name("with-lock");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const result = await a.withLock(name, async ({ token, signal, lock }) => {
        expect(signal.aborted).toBe(false);
        expect(lock.token).toBe(token);
        expect(await b.tryAcquire(name)).toBeNull();
        expect(await a.holder(name)).toMatchObject({ token });
        return { token };
      });
      expect(typeof result.token).toBe("bigint");
      expect(await b.tryAcquire(name)).not.toBeNull();
    });

    it("releases when fn throws and rethrows fn's error", async () => {
      const name = ctx.name("with-lock-throw");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const boom = new Error("job failed");
      let seen: AbortSignal | undefined;
      await expect(
        a.withLock(name, ({ signal }) => {
          seen = signal;
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(seen?.aborted).toBe(true);
      expect(await b.tryAcquire(name)).not.toBeNull();
    });
  });
}
