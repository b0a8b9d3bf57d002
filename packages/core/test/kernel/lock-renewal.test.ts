import { describe, expect, it } from "vitest";
import { createCoordinator, defaultDriftMs, sleep } from "../../src/index.js";
import { failOnUnhandledRejections, recordEvents, setup } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

describe("renewal keeps a lock for as long as it is held", () => {
  it("holds through 10 TTLs with renewed events, and no one else can take it", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["renewed", "lost"]);
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });

    await clock.advance(10 * ttlMs);

    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(events.lost).toEqual([]);
    // Default interval is a third of the TTL: about 30 renewals in 10 TTLs.
    expect(events.renewed.length).toBeGreaterThanOrEqual(27);
    expect(events.renewed.every((e) => e.locks === 1)).toBe(true);

    // The store agrees: another coordinator on the same store cannot take it.
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    expect(await other.tryAcquire("jobs")).toBeNull();
    expect((await other.holder("jobs"))?.ownerId).toBe(coordinator.ownerId);
  });

  it("remainingMs never drops below a renewal's worth while renewals succeed", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(lock.remainingMs()).toBe(ttlMs - defaultDriftMs(ttlMs));
    for (let i = 0; i < 20; i++) {
      await clock.advance(100);
      expect(lock.remainingMs()).toBeGreaterThan(ttlMs - defaultDriftMs(ttlMs) - ttlMs / 3 - 1);
    }
  });

  it("renews every renewEveryMs when one is given", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000, renewEveryMs: 100 });
    await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(1_000);
    expect(backend.calls.keepAlive).toBe(10);
  });

  it("renews all of a coordinator's locks with one keepAlive per interval, not one per lock", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 900 });
    const locks = await Promise.all(
      ["a", "b", "c", "d", "e"].map((name) => coordinator.acquire(name, { waitMs: 0 })),
    );
    await clock.advance(3 * ttlMs);
    expect(backend.calls.openSession).toBe(1);
    expect(backend.calls.keepAlive).toBe(9); // every 300 ms for 2700 ms
    expect(locks.every((l) => l.held)).toBe(true);
  });

  it("never has two keepAlives in flight when one takes longer than the interval", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000, renewEveryMs: 100 });
    backend.hooks.keepAlive = async (_session, next) => {
      const result = await next();
      await sleep(clock, 300); // three intervals long
      return result;
    };
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(10 * ttlMs);
    expect(backend.maxKeepAliveInFlight).toBe(1);
    expect(backend.calls.keepAlive).toBeGreaterThanOrEqual(20);
    expect(lock.held).toBe(true);
  });

  it("a slow but healthy store keeps the lock: renewals start an interval after the last start", async () => {
    // Each keepAlive takes 400 ms of a 1000 ms TTL and always succeeds. Renewing every
    // 333 ms counted from the start of the previous renewal confirms a new start every
    // 400 ms, well inside ttl - drift (988 ms). Counting the interval from the end of the
    // previous renewal spaces starts 733 ms apart, and the renewal in flight cannot confirm
    // before the deadline of the one before it (733 + 400 > 988).
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.keepAlive = async (_session, next) => {
      const result = await next();
      await sleep(clock, 400);
      return result;
    };
    const events = recordEvents(coordinator, ["lost"]);
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(10 * ttlMs);
    expect(events.lost).toEqual([]);
    expect(lock.held).toBe(true);
    expect(backend.maxKeepAliveInFlight).toBe(1);
  });

  it("a session whose open took most of the TTL is renewed at once, so its locks are not lost", async () => {
    // The deadline counts from the start of the open (the store's lease may date from then),
    // so the first renewal does too: an open of 700 ms of a 1000 ms TTL (a busy machine, a
    // slow store) is renewed as soon as it opened, not 333 ms later, past the deadline.
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.openSession = async (_options, next) => {
      await sleep(clock, 700);
      return await next();
    };
    const events = recordEvents(coordinator, ["lost", "renewed"]);
    const acquiring = coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(700);
    const lock = await acquiring;
    expect(events.renewed).toHaveLength(1);
    await clock.advance(10 * ttlMs);
    expect(events.lost).toEqual([]);
    expect(lock.held).toBe(true);
    expect(backend.calls.openSession).toBe(1);
  });
});
