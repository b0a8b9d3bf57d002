import { describe, expect, it } from "vitest";
import { LockLostError } from "../../src/index.js";
import { setup } from "../support/helpers.js";

describe("a lock read right after a pause", () => {
  it("`held` read first is false and the signal aborts at once when the deadline passed during the pause", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    expect(lock.held).toBe(true);
    // The process was frozen for 2 TTLs; its timers have not run yet.
    clock.jump(2 * ttlMs);
    expect(lock.held).toBe(false); // no timer ran yet: reading `held` checks on the spot
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect((lock.signal.reason as LockLostError).reason).toBe("deadline");
    expect(() => lock.throwIfLost()).toThrow(LockLostError);
  });

  it("`throwIfLost()` called first after the pause throws the deadline loss", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    clock.jump(2 * ttlMs);
    expect(() => lock.throwIfLost()).toThrow(/deadline|no renewal/);
    expect(lock.lostReason).toBe("deadline");
  });

  /** Acquires "invoices", reads its signal while held, then freezes the process past the deadline. */
  const pausedPastDeadline = async () => {
    const ctx = setup({ ttlMs: 1_000 });
    const lock = await ctx.coordinator.acquire("invoices", { waitMs: 0 });
    const signal = lock.signal; // built before the pause, as code that passes it on does
    expect(signal.aborted).toBe(false);
    // The process was frozen for 2 TTLs; its timers have not run yet.
    ctx.clock.jump(2 * ctx.ttlMs);
    return { ...ctx, lock, signal };
  };

  const expectDeadlineLoss = (reason: unknown) => {
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe("deadline");
  };

  it("the signal's first `aborted` read after the pause is true, with reason `deadline`", async () => {
    const { signal } = await pausedPastDeadline();
    expect(signal.aborted).toBe(true);
    expectDeadlineLoss(signal.reason);
  });

  it("the signal's first `throwIfAborted()` after the pause throws the deadline loss", async () => {
    const { signal } = await pausedPastDeadline();
    let thrown: unknown;
    try {
      signal.throwIfAborted();
    } catch (error) {
      thrown = error;
    }
    expectDeadlineLoss(thrown);
  });

  it("the signal's first `reason` read after the pause is the deadline loss", async () => {
    const { signal } = await pausedPastDeadline();
    expectDeadlineLoss(signal.reason);
    expect(signal.aborted).toBe(true);
  });

  it("the first check aborts the signal right then: its listeners run and `lost` is emitted once", async () => {
    const { coordinator, signal, clock } = await pausedPastDeadline();
    const lost: string[] = [];
    coordinator.on("lost", ({ reason }) => {
      lost.push(reason);
    });
    const heard: unknown[] = [];
    signal.addEventListener("abort", () => heard.push(signal.reason));
    expect(signal.aborted).toBe(true);
    expect(heard).toHaveLength(1);
    expectDeadlineLoss(heard[0]);
    await clock.advance(0); // the overdue deadline timer runs now: nothing more happens
    expect(heard).toHaveLength(1);
    expect(lost).toEqual(["deadline"]);
  });

  it("`lostReason` read first after the pause is `deadline`", async () => {
    const { lock } = await pausedPastDeadline();
    expect(lock.lostReason).toBe("deadline");
    expect(lock.signal.aborted).toBe(true);
  });

  it("the withLock context's signal tells the truth at its first check after a pause", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const seen: boolean[] = [];
    const done = coordinator.withLock("invoices", async ({ signal }) => {
      seen.push(signal.aborted);
      clock.jump(2 * ttlMs); // frozen while inside the critical section
      seen.push(signal.aborted);
    });
    const error = await done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(seen).toEqual([false, true]);
    expectDeadlineLoss(error);
  });

  it("the signal stays a real AbortSignal that other APIs accept", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    const signal = lock.signal;
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(Object.prototype.toString.call(signal)).toBe("[object AbortSignal]");
    const any = AbortSignal.any([signal]);
    expect(any.aborted).toBe(false);
    const target = new EventTarget();
    let calls = 0;
    target.addEventListener("ping", () => calls++, { signal });
    target.dispatchEvent(new Event("ping"));
    clock.jump(2 * ttlMs);
    expect(signal.aborted).toBe(true); // the check aborts it, and with it whatever follows it
    expect(any.aborted).toBe(true);
    expectDeadlineLoss(any.reason);
    target.dispatchEvent(new Event("ping"));
    expect(calls).toBe(1);
  });

  it("a released lock's signal answers `released`, and a pause after the release changes nothing", async () => {
    const { clock, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("invoices", { waitMs: 0 });
    const signal = lock.signal;
    expect(await lock.release()).toBe(true);
    clock.jump(2 * ttlMs);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as LockLostError).reason).toBe("released");
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
