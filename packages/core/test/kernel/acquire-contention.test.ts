import { describe, expect, it } from "vitest";
import {
  type Coordinator,
  createCoordinator,
  LockHeldError,
  LockTimeoutError,
  type ManualClock,
} from "../../src/index.js";
import { flush, recordEvents, rejectionOf, setup, track } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

/** A second coordinator (its own session) on the same store and clock. */
function rival(clock: ManualClock, backend: ScriptedBackend, ttlMs: number): Coordinator {
  return createCoordinator({
    backend: new ScriptedBackend({ clock, store: backend.inner.store }),
    clock,
    ttlMs,
    ownerId: "rival",
  });
}

describe("acquire when someone else holds the lock", () => {
  it("waitMs 0 rejects at once with LockHeldError naming the lock", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs).acquire("jobs", { waitMs: 0 });
    const error = await rejectionOf(coordinator.acquire("jobs", { waitMs: 0 }));
    expect(error).toBeInstanceOf(LockHeldError);
    expect(error).toMatchObject({ lockName: "jobs", code: "BATON_LOCK_HELD" });
  });

  it("tryAcquire resolves null", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs).acquire("jobs", { waitMs: 0 });
    expect(await coordinator.tryAcquire("jobs")).toBeNull();
    // And it is not left holding or queued: the name is free for it once released.
    expect((await coordinator.holder("jobs"))?.ownerId).toBe("rival");
  });

  it("rejects with LockTimeoutError when waitMs runs out, not before", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    await rival(clock, backend, ttlMs).acquire("jobs", { waitMs: 0 });
    const waiting = track(coordinator.acquire("jobs", { waitMs: 2_500 }));
    await clock.advance(2_499);
    expect(waiting.status).toBe("pending");
    await clock.advance(1);
    expect(waiting.status).toBe("rejected");
    expect(waiting.error).toBeInstanceOf(LockTimeoutError);
    expect(waiting.error).toMatchObject({ lockName: "jobs", waitMs: 2_500 });
  });

  it("a timed-out waiter leaves nothing behind: the next acquirer gets the lock on release", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const holder = await rival(clock, backend, ttlMs).acquire("jobs", { waitMs: 0 });
    const timedOut = track(coordinator.acquire("jobs", { waitMs: 100 }));
    await clock.advance(100);
    expect(timedOut.status).toBe("rejected");
    await holder.release();
    const third = rival(clock, backend, ttlMs);
    expect(await third.tryAcquire("jobs")).not.toBeNull();
  });

  it("a waiting acquire gets the lock as soon as the holder releases", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["acquired"]);
    const holder = await rival(clock, backend, ttlMs).acquire("jobs", { waitMs: 0 });
    const waiting = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await clock.advance(300);
    expect(waiting.status).toBe("pending");
    await holder.release();
    await flush();
    expect(waiting.status).toBe("fulfilled");
    expect(waiting.value?.token).toBeGreaterThan(holder.token);
    expect(events.acquired).toEqual([
      {
        name: "jobs",
        token: waiting.value?.token,
        waitedMs: 300,
        attempts: 1,
        lock: waiting.value,
      },
    ]);
  });

  it("a waiting acquire gets the lock when the holder's lease expires", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const deadBackend = new ScriptedBackend({ clock, store: backend.inner.store });
    // A frozen holder: its renewals and its close never reach the store.
    deadBackend.hooks.keepAlive = () => new Promise(() => undefined);
    deadBackend.hooks.closeSession = () => new Promise(() => undefined);
    const dead = createCoordinator({ backend: deadBackend, clock, ttlMs });
    await dead.acquire("jobs", { waitMs: 0 });
    const waiting = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await clock.advance(ttlMs - 1);
    expect(waiting.status).toBe("pending");
    await clock.advance(1);
    expect(waiting.status).toBe("fulfilled");
  });
});

describe("acquires of one name on one coordinator", () => {
  it("are serialised: the second waits for the first's release", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const first = await coordinator.acquire("jobs", { waitMs: 0 });
    const second = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await clock.advance(2_000);
    expect(second.status).toBe("pending");
    // The backend never saw a second acquire of the key while the first held it.
    expect(backend.calls.acquire).toBe(1);
    await first.release();
    await flush();
    expect(second.status).toBe("fulfilled");
    expect(second.value?.token).toBeGreaterThan(first.token);
    expect(backend.violations).toEqual([]);
  });

  it("run in call order", async () => {
    const { coordinator } = setup({ ttlMs: 1_000 });
    const first = await coordinator.acquire("jobs", { waitMs: 0 });
    const order: number[] = [];
    const waiters = [1, 2, 3, 4, 5].map((n) =>
      coordinator.acquire("jobs", { waitMs: 10_000 }).then(async (lock) => {
        order.push(n);
        await lock.release();
      }),
    );
    await first.release();
    await Promise.all(waiters);
    expect(order).toEqual([1, 2, 3, 4, 5]);
  });

  it("waitMs 0 and tryAcquire do not wait behind the coordinator's own holder", async () => {
    const { coordinator } = setup();
    await coordinator.acquire("jobs", { waitMs: 0 });
    await expect(coordinator.acquire("jobs", { waitMs: 0 })).rejects.toBeInstanceOf(LockHeldError);
    expect(await coordinator.tryAcquire("jobs")).toBeNull();
  });

  it("a wait behind the coordinator's own holder times out with LockTimeoutError", async () => {
    const { clock, coordinator } = setup({ ttlMs: 1_000 });
    await coordinator.acquire("jobs", { waitMs: 0 });
    const second = track(coordinator.acquire("jobs", { waitMs: 500 }));
    await clock.advance(500);
    expect(second.error).toBeInstanceOf(LockTimeoutError);
  });

  it("different names do not wait for each other", async () => {
    const { coordinator } = setup();
    const a = await coordinator.acquire("a", { waitMs: 0 });
    const b = await coordinator.acquire("b", { waitMs: 0 });
    expect([a.held, b.held]).toEqual([true, true]);
  });
});
