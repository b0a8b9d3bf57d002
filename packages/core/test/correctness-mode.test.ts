import { describe, expect, it } from "vitest";
import {
  createCoordinator,
  type Fence,
  LockTimeoutError,
  ManualClock,
  MemoryFence,
  StaleTokenError,
} from "../src/index.js";
import { flush, recordEvents, rejectionOf, track } from "./fakes/helpers.js";
import { ScriptedBackend } from "./fakes/scripted-backend.js";

function correctness(fence: Fence, backend = new ScriptedBackend({ clock: new ManualClock() })) {
  const clock = backend.clock as ManualClock;
  const coordinator = createCoordinator({
    backend,
    clock,
    ttlMs: 1_000,
    mode: "correctness",
    fence,
  });
  return { clock, backend, coordinator };
}

describe("correctness mode raises the fence before the caller gets the lock", () => {
  it("fence.highest is the new token right after acquire", async () => {
    const fence = new MemoryFence();
    const { coordinator } = correctness(fence);
    const first = await coordinator.acquire("invoices", { waitMs: 0 });
    expect(fence.highest("invoices")).toBe(first.token);
    await first.release();
    const second = await coordinator.acquire("invoices", { waitMs: 0 });
    expect(fence.highest("invoices")).toBe(second.token);
  });

  it("withLock's fn already sees the raised fence", async () => {
    const fence = new MemoryFence();
    const { coordinator } = correctness(fence);
    const seen = await coordinator.withLock("invoices", ({ token }) => ({
      token,
      highest: fence.highest("invoices"),
    }));
    expect(seen.highest).toBe(seen.token);
  });

  it("once the new holder has the lock, the old holder's writes are rejected", async () => {
    const fence = new MemoryFence();
    const { clock, backend, coordinator } = correctness(fence);
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs: 1_000,
      mode: "correctness",
      fence,
    });
    const old = await coordinator.acquire("invoices", { waitMs: 0 });
    await old.release();
    await other.acquire("invoices", { waitMs: 0 });
    // The paused old holder wakes up and writes with its token, before the new holder wrote.
    let applied = false;
    const error = await rejectionOf(
      fence.write("invoices", old.token, () => {
        applied = true;
      }),
    );
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(applied).toBe(false);
  });

  it("a fence.raise that throws makes acquire reject with its error, and the lock is released", async () => {
    const failure = new Error("fence store down");
    const fence: Fence = {
      raise: async () => {
        throw failure;
      },
    };
    const { clock, backend, coordinator } = correctness(fence);
    const events = recordEvents(coordinator, ["acquired"]);
    const error = await rejectionOf(coordinator.acquire("invoices", { waitMs: 0 }));
    expect(error).toBe(failure);
    expect(events.acquired).toEqual([]);
    // Another coordinator can take it at once.
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs: 1_000,
    });
    expect(await other.tryAcquire("invoices")).not.toBeNull();
  });

  it("a fence that has seen a newer token rejects the acquire with StaleTokenError", async () => {
    const fence = new MemoryFence();
    await fence.raise("invoices", 1_000n); // e.g. tokens of a store that was replaced
    const { coordinator } = correctness(fence);
    const error = await rejectionOf(coordinator.acquire("invoices", { waitMs: 0 }));
    expect(error).toBeInstanceOf(StaleTokenError);
    // Nothing is left held: the same coordinator can try again (and fail the same way).
    expect(await coordinator.holder("invoices")).toBeNull();
  });

  it('a fence rejection is reported as a lost lock with reason "fence-rejected"', async () => {
    const fence = new MemoryFence();
    await fence.raise("invoices", 1_000n);
    const { coordinator } = correctness(fence);
    const events = recordEvents(coordinator, ["lost", "acquired"]);
    await expect(coordinator.acquire("invoices", { waitMs: 0 })).rejects.toBeInstanceOf(
      StaleTokenError,
    );
    expect(events.acquired).toEqual([]);
    expect(events.lost).toMatchObject([{ name: "invoices", reason: "fence-rejected" }]);
  });

  it("a fence.raise that never answers cannot hang acquire past waitMs", async () => {
    const fence: Fence = { raise: () => new Promise(() => undefined) };
    const { clock, coordinator } = correctness(fence);
    const pending = track(coordinator.acquire("invoices", { waitMs: 2_000 }));
    await flush();
    await clock.advance(2_000);
    expect(pending.status).toBe("rejected");
    expect(pending.error).not.toBeInstanceOf(LockTimeoutError); // the lock was free
    expect(await coordinator.holder("invoices")).toBeNull();
  });

  it("efficiency mode does not touch a fence", async () => {
    const fence = new MemoryFence();
    const clock = new ManualClock();
    const coordinator = createCoordinator({
      backend: new ScriptedBackend({ clock }),
      clock,
      ttlMs: 1_000,
      fence,
    });
    await coordinator.acquire("invoices", { waitMs: 0 });
    expect(fence.highest("invoices")).toBeUndefined();
  });
});
