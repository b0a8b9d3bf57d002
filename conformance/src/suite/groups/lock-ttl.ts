import { ConfigError, defaultDriftMs, LockLostError } from "@baton/core";
import { describe, expect, it } from "vitest";
import { delay, type SuiteContext } from "../suite-context.js";

/**
 * A lock's own TTL (`acquire(name, { ttlMs })`) and `lock.extend()`. Stores lease per session,
 * so a lock's TTL is its session's: the coordinator keeps a session per TTL in use.
 */
export function lockTtlGroup(ctx: SuiteContext): void {
  describe("a TTL per lock, and extend()", () => {
    it("a lock acquired with its own ttlMs gets a lease of that length, renewed past the coordinator's TTL", async () => {
      const ttl = ctx.target.ttlMs;
      const lockTtl = ttl * 2;
      const name = ctx.name("lock-ttl");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const opened: number[] = [];
      a.on("sessionOpened", ({ ttlMs }) => opened.push(ttlMs));
      const lock = await a.acquire(name, { ttlMs: lockTtl });
      expect(lock.ttlMs).toBe(lockTtl);
      expect(opened).toEqual([lockTtl]);
      expect(lock.remainingMs()).toBeGreaterThan(ttl);
      const seen = await a.holder(name);
      expect(seen).toMatchObject({ ownerId: a.ownerId });
      // Where the store tells the lease it holds (Redis PTTL, etcd lease TTL), it is the lock's.
      if (seen?.remainingMs !== undefined) expect(seen.remainingMs).toBeGreaterThan(ttl);
      await delay(lockTtl * 1.25);
      expect(lock.held).toBe(true);
      expect(await b.tryAcquire(name)).toBeNull();
      // A lock of the coordinator's own TTL lives beside it, on the coordinator's session.
      const other = await a.acquire(ctx.name("lock-ttl-default"));
      expect(other.ttlMs).toBe(a.ttlMs);
      await lock.release();
      expect(await b.tryAcquire(name)).not.toBeNull();
    });

    it("the store keeps a lease of a longer TTL than the coordinator's for its whole TTL after renewals stop", async () => {
      const ttl = ctx.target.ttlMs;
      const lockTtl = ttl * 2;
      const name = ctx.name("lock-ttl-frozen");
      const frozen = await ctx.frozenHolder(name, lockTtl);
      const b = ctx.coordinator();
      await delay(ttl * 1.4);
      expect(await b.tryAcquire(name)).toBeNull();
      const lock = await b.acquire(name, { waitMs: lockTtl * 4 + 5_000 });
      if (ctx.backend.guarantees.fencing !== "none") {
        expect(lock.token).toBeGreaterThan(frozen.grant.token);
      }
    });

    it("extend() renews at once and resolves with about a TTL left; extend(ms) past the TTL is a ConfigError", async () => {
      const ttl = ctx.target.ttlMs;
      const name = ctx.name("extend");
      const a = ctx.coordinator();
      const lock = await a.acquire(name);
      let renewals = 0;
      a.on("renewed", () => {
        renewals++;
      });
      await delay(ttl / 6);
      const seenBefore = renewals;
      const called = performance.now();
      const left = await lock.extend();
      const tookMs = performance.now() - called;
      expect(renewals).toBeGreaterThan(seenBefore);
      // The renewal started after the call: its lease runs a full TTL (less the drift
      // allowance) from then.
      expect(left).toBeGreaterThanOrEqual(lock.ttlMs - defaultDriftMs(lock.ttlMs) - tookMs - 1);
      expect(left).toBeLessThanOrEqual(lock.ttlMs);
      // With at least `ms` left, extend(ms) needs no round trip.
      const quiet = renewals;
      expect(await lock.extend(1)).toBeGreaterThanOrEqual(1);
      expect(renewals).toBe(quiet);
      await expect(lock.extend(lock.ttlMs + 1)).rejects.toThrow(ConfigError);
      expect(lock.held).toBe(true);
      await lock.release();
      const error = await lock.extend().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockLostError);
      expect((error as LockLostError).reason).toBe("released");
    });

    it("rejects a bad ttlMs with ConfigError before any I/O", async () => {
      const name = ctx.name("lock-ttl-bad");
      const a = ctx.coordinator();
      for (const ttlMs of [0, -1, 1.5, "5000"]) {
        const error = await a.acquire(name, { ttlMs: ttlMs as number }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).field).toBe("ttlMs");
      }
    });
  });
}
