import { describe, expect, it } from "vitest";
import {
  type CoordinatorEvents,
  createCoordinator,
  type LockBackend,
  ManualClock,
  MemoryBackend,
} from "../../src/index.js";
import { wrappedMemory } from "../support/wrapped-memory.js";

/** A memory backend that counts its close() calls. */
function countingCloses(): { backend: LockBackend; closes: () => number } {
  const inner = new MemoryBackend();
  let closes = 0;
  const backend: LockBackend = {
    kind: inner.kind,
    guarantees: inner.guarantees,
    openSession: (options) => inner.openSession(options),
    close: async () => {
      closes++;
      await inner.close();
    },
  };
  return { backend, closes: () => closes };
}

const never = () => new Promise<never>(() => undefined);

describe("who closes a backend", () => {
  it("close() closes the backend it was given, exactly once", async () => {
    const { backend, closes } = countingCloses();
    const coordinator = createCoordinator({ backend });
    await (await coordinator.acquire("report")).release();
    await coordinator.acquire("held");
    await coordinator.close();
    expect(closes()).toBe(1);
    await coordinator.close();
    expect(closes()).toBe(1);
  });

  it("closes a backend shared by several coordinators when the last of them closes", async () => {
    const { backend, closes } = countingCloses();
    const first = createCoordinator({ backend, ownerId: "first" });
    const second = createCoordinator({ backend, ownerId: "second" });
    await first.acquire("a");
    await first.close();
    expect(closes()).toBe(0);
    // The second coordinator still works on the shared backend.
    await (await second.acquire("a")).release();
    await second.close();
    expect(closes()).toBe(1);
  });

  it("leaves the backend open with closeBackend: false", async () => {
    const { backend, closes } = countingCloses();
    const coordinator = createCoordinator({ backend, closeBackend: false });
    await coordinator.acquire("report");
    await coordinator.close();
    expect(closes()).toBe(0);
    const again = createCoordinator({ backend });
    await (await again.acquire("report")).release();
    await again.close();
    expect(closes()).toBe(1);
  });

  it("refuses closeBackend with a URL, or that is not a boolean", () => {
    expect(() => createCoordinator({ url: "memory://", closeBackend: false })).toThrow(
      /^closeBackend: applies to a `backend` instance only/,
    );
    expect(() =>
      createCoordinator({ backend: new MemoryBackend(), closeBackend: "no" as never }),
    ).toThrow(/^closeBackend: must be true or false/);
  });
});

describe("close() is bounded", () => {
  it("settles within one TTL (at least 5 s) when the store's closes never answer, and says so", async () => {
    const clock = new ManualClock();
    const inner = wrappedMemory("silent", () => ({ close: never }));
    const backendCloses: number[] = [];
    const backend: LockBackend = {
      ...inner,
      openSession: (options) => inner.openSession(options),
      close: () => {
        backendCloses.push(clock.now());
        return never();
      },
    };
    const warnings: string[] = [];
    const coordinator = createCoordinator({
      backend,
      clock,
      ttlMs: 3_000,
      logger: { warn: (message) => warnings.push(message) },
    });
    const errors: CoordinatorEvents["backgroundError"][] = [];
    coordinator.on("backgroundError", (e) => errors.push(e));
    await coordinator.acquire("report");
    let settled = false;
    const closing = coordinator.close().then(() => {
      settled = true;
    });
    await clock.advance(4_999);
    expect(settled).toBe(false);
    await clock.advance(1);
    await closing;
    expect(settled).toBe(true);
    expect(errors.map((e) => e.during)).toEqual(["closing the coordinator"]);
    expect(String(errors[0]?.error)).toMatch(
      /close\(\) did not finish within 5000 ms .*: still closing the sessions/,
    );
    expect(warnings.some((w) => w.includes("did not finish within 5000 ms"))).toBe(true);
    // The backend's close was still started, so what it opened can go.
    expect(backendCloses).toEqual([5_000]);
    expect(clock.pendingTimers).toBe(0);
  });

  it("settles in time when only the backend's close never answers", async () => {
    const clock = new ManualClock();
    const inner = new MemoryBackend();
    const backend: LockBackend = {
      kind: inner.kind,
      guarantees: inner.guarantees,
      openSession: (options) => inner.openSession(options),
      close: never,
    };
    const coordinator = createCoordinator({ backend, clock, ttlMs: 10_000 });
    const errors: unknown[] = [];
    coordinator.on("backgroundError", ({ error }) => errors.push(error));
    await coordinator.acquire("report");
    const closing = coordinator.close();
    await clock.advance(10_000);
    await closing;
    expect(String(errors[0])).toMatch(/within 10000 ms .*: still closing the backend/);
  });

  it("settles at once, with no timer left, when the store answers", async () => {
    const clock = new ManualClock();
    const coordinator = createCoordinator({ backend: new MemoryBackend(), clock });
    await coordinator.acquire("report");
    await coordinator.close();
    expect(clock.pendingTimers).toBe(0);
  });
});
