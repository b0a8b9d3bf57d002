import { ConfigError, LockHeldError, type LockLostError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { recordedToken } from "../../history/recorded-token.js";
import type { SuiteContext } from "../suite-context.js";

/**
 * acquire / tryAcquire / release / holder, and owner-checked release at the backend level.
 * `timeLeft`: whether `holder()` tells the time left on another session's lease (see
 * `DeclaredCapabilities.timeLeft`).
 */
export function basicGroup(ctx: SuiteContext, timeLeft?: boolean): void {
  describe("acquire, try, release", () => {
    it("grants a free lock with a token (or, on a backend without fencing, none) and publishes the holder", async () => {
      const a = ctx.coordinator({ ownerId: "owner-a" });
      const name = ctx.name("basic");
      const lock = await a.acquire(name, { value: "node-a:8080" });
      if (ctx.backend.guarantees.fencing === "none") {
        // Its grants carry no order: no token to hand a fence by mistake.
        expect(() => lock.token).toThrow(ConfigError);
      } else expect(typeof lock.token).toBe("bigint");
      expect(lock.held).toBe(true);
      expect(lock.signal.aborted).toBe(false);
      expect(lock.name).toBe(name);
      const holder = await a.holder(name);
      expect(holder).toEqual({
        ownerId: "owner-a",
        token: recordedToken(lock),
        value: "node-a:8080",
        // A store that tells the time left on the lease adds it.
        ...(holder?.remainingMs === undefined ? {} : { remainingMs: expect.any(Number) }),
      });
    });

    it(`holder() of a lock another coordinator holds ${timeLeft === false ? "gives no time left" : "tells the time left, within the lease"}`, async () => {
      const ttl = ctx.target.ttlMs;
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("time-left");
      const lock = await a.acquire(name);
      const seen = await b.holder(name);
      expect(seen).toMatchObject({ ownerId: a.ownerId });
      const remainingMs = seen?.remainingMs;
      if (timeLeft === false) expect(remainingMs).toBeUndefined();
      else if (timeLeft === true || remainingMs !== undefined) {
        expect(remainingMs).toBeGreaterThan(0);
        expect(remainingMs).toBeLessThanOrEqual(ttl);
      }
      await lock.release();
      expect(await b.holder(name)).toBeNull();
    });

    it("excludes a second owner while held: tryAcquire gives null, waitMs 0 gives LockHeldError", async () => {
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("exclude");
      const lock = await a.acquire(name);
      expect(await b.tryAcquire(name)).toBeNull();
      await expect(b.acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockHeldError);
      expect(lock.held).toBe(true);
    });

    it("release frees the lock, is idempotent and reports whether it was still ours", async () => {
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("release");
      const lock = await a.acquire(name);
      const first = lock.release();
      expect(lock.release()).toBe(first);
      expect(await first).toBe(true);
      expect(await lock.release()).toBe(true);
      expect(lock.held).toBe(false);
      expect(await b.holder(name)).toBeNull();
      const next = await b.tryAcquire(name);
      expect(next).not.toBeNull();
      expect(await a.holder(name)).toMatchObject({
        ownerId: b.ownerId,
        token: next === null ? undefined : recordedToken(next),
      });
    });

    it("release() ends the lock's signal before the store frees it: a waiter's grant never finds it live", async () => {
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("release-signal");
      const lock = await a.acquire(name);
      const next = b.acquire(name, { waitMs: ctx.target.ttlMs * 10 });
      await new Promise((resolve) => setTimeout(resolve, 100)); // b waits
      const releasing = lock.release();
      // At once, before the store answers: the holder's work stops before anyone else starts.
      expect(lock.signal.aborted).toBe(true);
      expect(lock.held).toBe(false);
      expect((lock.signal.reason as LockLostError).reason).toBe("released");
      const stillLiveAtGrant = await next.then(async (granted) => {
        const live = !lock.signal.aborted;
        await granted.release();
        return live;
      });
      expect(stillLiveAtGrant).toBe(false);
      expect(await releasing).toBe(true);
    });

    it("a session cannot release another session's grant", async () => {
      const name = ctx.name("owner-check");
      const signal = new AbortController().signal;
      const s1 = await ctx.backend.openSession({ ttlMs: ctx.target.ttlMs * 20, ownerId: "s1" });
      const s2 = await ctx.backend.openSession({ ttlMs: ctx.target.ttlMs * 20, ownerId: "s2" });
      try {
        const grant = await s1.acquire(name, { wait: false, signal });
        expect(grant).not.toBeNull();
        if (grant === null) return;
        expect(await s2.release(grant)).toBe(false);
        expect(await s2.holder(name)).toMatchObject({ ownerId: "s1", token: grant.token });
        expect(await s1.release(grant)).toBe(true);
        expect(await s1.release(grant)).toBe(false);
      } finally {
        await Promise.allSettled([s1.close(), s2.close()]);
      }
    });

    it("closing a session frees what it holds", async () => {
      const name = ctx.name("close-frees");
      const s1 = await ctx.backend.openSession({ ttlMs: ctx.target.ttlMs * 20, ownerId: "closer" });
      const grant = await s1.acquire(name, { wait: false, signal: new AbortController().signal });
      expect(grant).not.toBeNull();
      await s1.close();
      const b = ctx.coordinator();
      expect(await b.tryAcquire(name)).not.toBeNull();
    });
  });
}
