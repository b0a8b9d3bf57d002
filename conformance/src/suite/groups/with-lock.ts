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

    it("JSON.stringify of a lock and of the withLock context writes the token in decimal", async () => {
      const name = ctx.name("with-lock-json");
      const a = ctx.coordinator();
      const lines = await a.withLock(
        name,
        (context) => ({
          lock: JSON.parse(JSON.stringify(context.lock)) as unknown,
          context: JSON.parse(JSON.stringify(context)) as unknown,
          token: context.token,
        }),
        { value: "worker-7" },
      );
      const lock = { name, token: lines.token.toString(), held: true, value: "worker-7" };
      expect(lines.lock).toEqual(lock);
      expect(lines.context).toEqual({ token: lines.token.toString(), lock });
      const released = await a.acquire(name);
      await released.release();
      expect(JSON.parse(JSON.stringify({ released }))).toEqual({
        released: { name, token: released.token.toString(), held: false },
      });
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
