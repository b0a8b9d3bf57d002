import { describe, expect, it } from "vitest";
import { type Coordinator, createCoordinator, type ManualClock } from "../../src/index.js";
import { flush, rejectionOf, setup, track } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

function rival(
  clock: ManualClock,
  backend: ScriptedBackend,
  ttlMs: number,
  ownerId: string,
): Coordinator {
  return createCoordinator({
    backend: new ScriptedBackend({ clock, store: backend.inner.store }),
    clock,
    ttlMs,
    ownerId,
  });
}

describe("cancelling an acquire with a signal", () => {
  it("rejects with the signal's own reason and leaves nothing behind in the store", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const holder = await rival(clock, backend, ttlMs, "holder").acquire("jobs", { waitMs: 0 });
    const controller = new AbortController();
    const waiting = track(
      coordinator.acquire("jobs", { waitMs: 60_000, signal: controller.signal }),
    );
    await clock.advance(100);
    const reason = new Error("shutting down");
    controller.abort(reason);
    await flush();
    expect(waiting.status).toBe("rejected");
    expect(waiting.error).toBe(reason);

    // The cancelled waiter is not granted the lock on release, and does not block the queue.
    await holder.release();
    const third = await rival(clock, backend, ttlMs, "third").tryAcquire("jobs");
    expect(third).not.toBeNull();
    expect((await coordinator.holder("jobs"))?.ownerId).toBe("third");
  });

  it("an abort with no reason rejects with the signal's AbortError", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs, "holder").acquire("jobs", { waitMs: 0 });
    const controller = new AbortController();
    const waiting = coordinator.acquire("jobs", { signal: controller.signal });
    controller.abort();
    const error = await rejectionOf(waiting);
    expect(error).toBe(controller.signal.reason);
    expect((error as Error).name).toBe("AbortError");
  });

  it("an already aborted signal rejects with its reason before any backend acquire", async () => {
    const { backend, coordinator } = setup();
    const reason = new Error("too late");
    const error = await rejectionOf(
      coordinator.acquire("jobs", { signal: AbortSignal.abort(reason) }),
    );
    expect(error).toBe(reason);
    expect(backend.calls.acquire).toBe(0);
    expect(await coordinator.tryAcquire("jobs")).not.toBeNull();
  });

  it("an already aborted signal rejects before any backend acquire on an open session too", async () => {
    const { backend, coordinator } = setup();
    await (await coordinator.acquire("warm")).release(); // the session is open now
    const before = backend.calls.acquire;
    const reason = new Error("too late");
    const error = await rejectionOf(
      coordinator.acquire("jobs", { signal: AbortSignal.abort(reason) }),
    );
    expect(error).toBe(reason);
    expect(backend.calls.acquire).toBe(before);
  });

  it("cancels a wait queued behind the same coordinator's own holder", async () => {
    const { coordinator } = setup();
    const first = await coordinator.acquire("jobs", { waitMs: 0 });
    const controller = new AbortController();
    const queued = track(coordinator.acquire("jobs", { signal: controller.signal }));
    const after = track(coordinator.acquire("jobs", { waitMs: 60_000 }));
    controller.abort(new Error("cancel"));
    await flush();
    expect(queued.status).toBe("rejected");
    await first.release();
    await flush();
    // The next in line is not blocked by the cancelled one.
    expect(after.status).toBe("fulfilled");
  });

  it("cancels while the session is still opening", async () => {
    const { backend, coordinator } = setup();
    let finishOpen: (() => void) | undefined;
    backend.hooks.openSession = async (_options, next) => {
      await new Promise<void>((resolve) => {
        finishOpen = resolve;
      });
      return await next();
    };
    const controller = new AbortController();
    const pending = track(coordinator.acquire("jobs", { signal: controller.signal }));
    await flush();
    const reason = new Error("stop");
    controller.abort(reason);
    await flush();
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBe(reason);
    // The open finishes later; the next acquire works.
    finishOpen?.();
    delete backend.hooks.openSession;
    expect(await coordinator.tryAcquire("jobs")).not.toBeNull();
  });

  it("a tryAcquire signal is honoured too", async () => {
    const { coordinator } = setup();
    const reason = new Error("no");
    await expect(
      coordinator.tryAcquire("jobs", { signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
  });
});

describe("an abandoned wait", () => {
  it("reports no background error when the backend honours the abort", async () => {
    const { clock, coordinator, backend } = setup({ ttlMs: 1_000 });
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs: 1_000,
    });
    const held = await other.acquire("jobs", { waitMs: 0 });
    const errors: unknown[] = [];
    coordinator.on("backgroundError", ({ error }) => errors.push(error));
    const waiting = track(coordinator.acquire("jobs", { waitMs: 200 }));
    await clock.advance(300);
    expect(waiting.status).toBe("rejected");
    const cancel = new AbortController();
    const cancelled = track(coordinator.acquire("jobs", { waitMs: 5_000, signal: cancel.signal }));
    await flush();
    cancel.abort(new Error("gave up"));
    await flush();
    expect(cancelled.status).toBe("rejected");
    expect(errors).toEqual([]);
    await held.release();
    await other.close();
  });
});
