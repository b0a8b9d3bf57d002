import type { Lock } from "@baton/core";
import { describe, expect, it } from "vitest";
import { recordedToken } from "../../history/recorded-token.js";
import type { SuiteContext } from "../suite-context.js";

/** `withLock` returns fn's result, passes signal and token, and always releases. */
export function withLockGroup(ctx: SuiteContext): void {
  describe("withLock", () => {
    it("runs fn under the lock with its token and signal, returns its result, then releases", async () => {
      const name = ctx.name("with-lock");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const tokenless = ctx.backend.guarantees.fencing === "none";
      const result = await a.withLock(name, async (context) => {
        const { signal, lock } = context;
        expect(signal.aborted).toBe(false);
        // A backend with no ordered tokens has none to give: reading one throws.
        if (tokenless) expect(() => context.token).toThrow(/no fencing token/);
        else expect(lock.token).toBe(context.token);
        expect(await b.tryAcquire(name)).toBeNull();
        expect(await a.holder(name)).toMatchObject({ token: recordedToken(lock) });
        return { token: recordedToken(lock) };
      });
      expect(typeof result.token).toBe("bigint");
      expect(await b.tryAcquire(name)).not.toBeNull();
    });

    it("JSON.stringify of a lock and of the withLock context never throws, the token in decimal", async () => {
      const name = ctx.name("with-lock-json");
      const a = ctx.coordinator();
      // A backend with no ordered tokens has no token to write (and `lock.token` throws).
      const tokenOf = (lock: Lock) =>
        ctx.backend.guarantees.fencing === "none" ? {} : { token: lock.token.toString() };
      const lines = await a.withLock(
        name,
        (context) => ({
          lock: JSON.parse(JSON.stringify(context.lock)) as unknown,
          context: JSON.parse(JSON.stringify(context)) as unknown,
          expected: { name, ...tokenOf(context.lock), held: true, value: "worker-7" },
        }),
        { value: "worker-7" },
      );
      expect(lines.lock).toEqual(lines.expected);
      const { token, ...rest } = lines.expected as { token?: string };
      expect(lines.context).toEqual({
        ...(token === undefined ? {} : { token }),
        lock: { token, ...rest },
      });
      const released = await a.acquire(name);
      await released.release();
      expect(JSON.parse(JSON.stringify({ released }))).toEqual({
        released: { name, ...tokenOf(released), held: false },
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
