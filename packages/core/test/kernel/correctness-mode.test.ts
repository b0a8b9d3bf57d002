import { describe, expect, it } from "vitest";
import {
  ConfigError,
  createCoordinator,
  type Fence,
  type FenceRaiseOptions,
  type Lock,
  LockLostError,
  LockTimeoutError,
  ManualClock,
  MemoryFence,
  SessionLostError,
  StaleTokenError,
} from "../../src/index.js";
import { expectError, flush, recordEvents, rejectionOf, track } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

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

  it("after a failed raise whose release fails too, the name stays taken here until the grant expires, so the session never acquires a key it still holds", async () => {
    const failure = new Error("fence store down");
    const fence: Fence = {
      raise: async () => {
        throw failure;
      },
    };
    const { clock, backend, coordinator } = correctness(fence);
    backend.hooks.release = async (_grant, next) => {
      clock.setTimer(() => void next(), 1_000); // expires by itself within one TTL
      throw new Error("ECONNRESET");
    };
    expect(await rejectionOf(coordinator.acquire("invoices", { waitMs: 0 }))).toBe(failure);
    delete backend.hooks.release;

    expect(await coordinator.tryAcquire("invoices")).toBeNull();
    expect(backend.violations).toEqual([]);
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

  it("a fence passed in efficiency mode is refused, not silently ignored", () => {
    const fence = new MemoryFence();
    const backend = new ScriptedBackend({ clock: new ManualClock() });
    for (const mode of [undefined, "efficiency"] as const) {
      let thrown: unknown;
      try {
        createCoordinator({ backend, ttlMs: 1_000, fence, ...(mode ? { mode } : {}) });
      } catch (caught) {
        thrown = caught;
      }
      const error = expectError(thrown, ConfigError);
      expect(error.field).toBe("fence");
      expect(error.message).toContain('mode "correctness"');
    }
  });

  it("the raise gets the lock's TTL and a signal that aborts when acquire gives up on it", async () => {
    let seen: FenceRaiseOptions | undefined;
    const fence: Fence = {
      raise: (_resource, _token, options) => {
        seen = options;
        return new Promise(() => undefined);
      },
    };
    const { clock, coordinator } = correctness(fence);
    const pending = track(coordinator.acquire("invoices", { waitMs: 2_000 }));
    await flush();
    expect(seen?.ttlMs).toBe(1_000);
    expect(seen?.signal?.aborted).toBe(false);
    await clock.advance(2_000);
    expect(pending.status).toBe("rejected");
    expect(seen?.signal?.aborted).toBe(true);
  });
});

describe("correctness mode never returns a lock that was lost during the fence raise", () => {
  /** A MemoryFence whose raise runs `during` (once per listed call) before it answers. */
  const fenceWith = (during: Array<(() => void) | undefined>) => {
    const fence = new MemoryFence();
    let calls = 0;
    const raise: Fence = {
      raise: async (resource, token) => {
        during[calls++]?.();
        await fence.raise(resource, token);
      },
    };
    return { fence, raise, calls: () => calls };
  };

  it("paused past the lease during the raise: acquire tries again and resolves with a held lock", async () => {
    let clock: ManualClock | undefined;
    const { fence, raise } = fenceWith([() => clock?.jump(2_000)]); // 2 TTLs frozen
    const setup = correctness(raise);
    clock = setup.clock;
    const events = recordEvents(setup.coordinator, ["acquired", "lost"]);
    const lock = await setup.coordinator.acquire("invoices", { waitMs: 10_000 });
    expect(lock.signal.aborted).toBe(false);
    expect(lock.held).toBe(true);
    expect(lock.token).toBe(2n); // the first grant (token 1) was lost and never handed over
    expect(fence.highest("invoices")).toBe(lock.token);
    expect(events.acquired).toMatchObject([{ name: "invoices", token: 2n }]);
    expect(events.lost).toMatchObject([{ name: "invoices", token: 1n, reason: "deadline" }]);
    expect(setup.backend.sessions).toHaveLength(2); // the frozen session was given up
    expect(setup.backend.violations).toEqual([]);
    await setup.clock.advance(5_000); // and it stays held, renewed on its new session
    expect(lock.held).toBe(true);
  });

  it("the store ended the session during the raise: acquire tries again on a new session", async () => {
    let backend: ScriptedBackend | undefined;
    const { raise } = fenceWith([
      () => backend?.lastSession.loseNow(new SessionLostError("terminated by the server")),
    ]);
    const setup = correctness(raise);
    backend = setup.backend;
    const lock = await setup.coordinator.acquire("invoices", { waitMs: 10_000 });
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(lock.token).toBe(2n);
    expect(setup.backend.sessions).toHaveLength(2);
  });

  it("with waitMs 0 it tries once more at once, and resolves when that grant holds", async () => {
    let backend: ScriptedBackend | undefined;
    const { raise } = fenceWith([
      () => backend?.lastSession.loseNow(new SessionLostError("terminated by the server")),
    ]);
    const setup = correctness(raise);
    backend = setup.backend;
    const lock = await setup.coordinator.tryAcquire("invoices");
    expect(lock?.held).toBe(true);
    expect(lock?.token).toBe(2n);
  });

  it("with waitMs 0, a second grant lost too makes it reject with the LockLostError", async () => {
    let backend: ScriptedBackend | undefined;
    const endSession = () =>
      backend?.lastSession.loseNow(new SessionLostError("terminated by the server"));
    const { raise, calls } = fenceWith([endSession, endSession]);
    const setup = correctness(raise);
    backend = setup.backend;
    const events = recordEvents(setup.coordinator, ["acquired"]);
    const error = await rejectionOf(setup.coordinator.acquire("invoices", { waitMs: 0 }));
    expectError(error, LockLostError, { lockName: "invoices", token: 2n, reason: "session-lost" });
    expect(calls()).toBe(2);
    expect(events.acquired).toEqual([]);
    // Nothing is left held here: the next try gets the lock.
    expect((await setup.coordinator.tryAcquire("invoices"))?.held).toBe(true);
  });

  it("a try paused past its TTL during the raise rejects with the LockLostError (reason deadline)", async () => {
    let clock: ManualClock | undefined;
    const { raise } = fenceWith([() => clock?.jump(2_000)]);
    const setup = correctness(raise);
    clock = setup.clock;
    const error = await rejectionOf(setup.coordinator.tryAcquire("invoices"));
    expectError(error, LockLostError, { lockName: "invoices", token: 1n, reason: "deadline" });
  });

  it("paused past the whole wait during the raise: LockTimeoutError, caused by the loss", async () => {
    let clock: ManualClock | undefined;
    const { raise, calls } = fenceWith([() => clock?.jump(3_000)]);
    const setup = correctness(raise);
    clock = setup.clock;
    const error = await rejectionOf(setup.coordinator.acquire("invoices", { waitMs: 2_500 }));
    const timeout = expectError(error, LockTimeoutError, { lockName: "invoices", waitMs: 2_500 });
    expectError(timeout.cause, LockLostError, { reason: "deadline" });
    expect(calls()).toBe(1);
    expect((await setup.coordinator.tryAcquire("invoices"))?.held).toBe(true);
  });

  it("a same-name acquire queued in this process meanwhile goes first; the retry waits its turn", async () => {
    let clock: ManualClock | undefined;
    let queued: ReturnType<typeof track<Lock>> | undefined;
    const { raise } = fenceWith([
      () => {
        // While the first raise is in flight another caller here asks for the same name.
        queued = track(setup.coordinator.acquire("invoices", { waitMs: 10_000 }));
        clock?.jump(2_000);
      },
    ]);
    const setup = correctness(raise);
    clock = setup.clock;
    const first = track(setup.coordinator.acquire("invoices", { waitMs: 10_000 }));
    await flush();
    expect(queued?.status).toBe("fulfilled");
    expect(queued?.value?.held).toBe(true);
    expect(first.status).toBe("pending"); // waiting for the queued caller's lock, not lost
    await queued?.value?.release();
    await flush();
    expect(first.status).toBe("fulfilled");
    expect(first.value?.held).toBe(true);
    expect(first.value?.token).toBeGreaterThan(queued?.value?.token ?? 0n);
  });
});
