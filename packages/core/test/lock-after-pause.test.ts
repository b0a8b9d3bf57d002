import { describe, expect, it } from "vitest";
import { LockLostError } from "../src/index.js";
import { setup } from "./fakes/helpers.js";

describe("a lock read right after a pause", () => {
  it("held is false and the signal aborts at once when the deadline passed during the pause", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    expect(lock.held).toBe(true);
    // The process was frozen for 2 TTLs; its timers have not run yet.
    clock.jump(2 * ttlMs);
    expect(lock.signal.aborted).toBe(false); // nothing ran yet...
    expect(lock.held).toBe(false); // ...but reading `held` checks the deadline on the spot
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect((lock.signal.reason as LockLostError).reason).toBe("deadline");
    expect(() => lock.throwIfLost()).toThrow(LockLostError);
  });

  it("when the renewal timer runs first after the pause, the loss is still the deadline and nothing renews", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    const renewalsBefore = backend.calls.keepAlive;
    // Frozen past the deadline; on waking, timers run in due order: the renewal comes first.
    clock.jump(2 * ttlMs);
    await clock.advance(0);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.lostReason).toBe("deadline");
    // A renewal sent now could succeed (nobody took the key) and make the lock trusted again.
    expect(backend.calls.keepAlive).toBe(renewalsBefore);
  });

  it("a pause shorter than the deadline leaves the lock held", async () => {
    const { clock, coordinator } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    clock.jump(500);
    expect(lock.held).toBe(true);
    expect(() => lock.throwIfLost()).not.toThrow();
    await clock.advance(5_000);
    expect(lock.held).toBe(true);
  });
});
