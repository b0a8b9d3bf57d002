import type { Holder } from "@baton/core";
import { describe, expect, it } from "vitest";
import type { SuiteContext } from "../suite-context.js";

/** `watch()` pushes the holder now and after every change (backends that have it). */
export function watchGroup(ctx: SuiteContext): void {
  describe("watch", () => {
    it("pushes the current holder, then each grant and release", async () => {
      const name = ctx.name("watch");
      const session = await ctx.backend.openSession({
        ttlMs: ctx.target.ttlMs * 20,
        ownerId: "watcher",
      });
      const controller = new AbortController();
      const seen: (Holder | null)[] = [];
      try {
        if (session.watch === undefined) throw new Error("watch missing");
        const iterator = session.watch(name, controller.signal)[Symbol.asyncIterator]();
        const next = async () => {
          const r = await iterator.next();
          if (r.done) throw new Error("watch ended early");
          seen.push(r.value);
          return r.value;
        };
        expect(await next()).toBeNull();
        const a = ctx.coordinator({ ownerId: "watched" });
        const lock = await a.acquire(name, { value: "v1" });
        let h = await next();
        while (h === null) h = await next();
        expect(h).toMatchObject({ ownerId: "watched", token: lock.token, value: "v1" });
        await lock.release();
        while ((await next()) !== null) {
          /* drain to the release */
        }
        controller.abort();
        await iterator.return?.();
      } finally {
        controller.abort();
        await session.close();
      }
      expect(seen.at(-1)).toBeNull();
    });
  });
}
