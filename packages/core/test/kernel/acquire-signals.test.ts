import { describe, expect, it } from "vitest";
import {
  type Coordinator,
  type CoordinatorEventName,
  createCoordinator,
  LockHeldError,
  LockTimeoutError,
  type ManualClock,
} from "../../src/index.js";
import {
  failOnUnhandledRejections,
  flush,
  recordEvents,
  rejectionOf,
  setup,
  track,
} from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

/** A second coordinator (its own session) on the same store and clock. */
function rival(clock: ManualClock, backend: ScriptedBackend, ttlMs: number): Coordinator {
  return createCoordinator({
    backend: new ScriptedBackend({ clock, store: backend.inner.store }),
    clock,
    ttlMs,
    ownerId: "rival",
  });
}

const SIGNALS = [
  "contended",
  "waitStarted",
  "waitEnded",
  "acquired",
  "acquireFailed",
] as const satisfies readonly CoordinatorEventName[];

/** Every payload of the acquire's events, in the order they came, as `[event, payload]`. */
function recordInOrder(coordinator: Coordinator): [string, unknown][] {
  const seen: [string, unknown][] = [];
  for (const name of SIGNALS) coordinator.on(name, (payload) => seen.push([name, payload]));
  return seen;
}

describe("acquire events", () => {
  it("an uncontended acquire emits only acquired, after one attempt", async () => {
    const { coordinator } = setup();
    const seen = recordInOrder(coordinator);
    const lock = await coordinator.acquire("jobs");
    expect(seen).toEqual([
      ["acquired", { name: "jobs", token: lock.token, waitedMs: 0, attempts: 1, lock }],
    ]);
  });

  it("a wait for a lock held elsewhere: contended, waitStarted, waitEnded, acquired", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    const holder = await rival(clock, backend, ttlMs).acquire("jobs");
    const seen = recordInOrder(coordinator);
    const waiting = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await flush();
    expect(seen).toEqual([
      ["contended", { name: "jobs" }],
      ["waitStarted", { name: "jobs" }],
    ]);
    await clock.advance(300);
    await holder.release();
    await flush();
    const lock = waiting.value;
    expect(lock?.held).toBe(true);
    expect(seen.slice(2)).toEqual([
      ["waitEnded", { name: "jobs", waitedMs: 300, outcome: "acquired" }],
      ["acquired", { name: "jobs", token: lock?.token, waitedMs: 300, attempts: 1, lock }],
    ]);
  });

  it("a wait that runs out ends as timeout, and the acquire as failed", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs).acquire("jobs");
    const seen = recordInOrder(coordinator);
    const waiting = track(coordinator.acquire("jobs", { waitMs: 500 }));
    await clock.advance(500);
    await flush();
    expect(waiting.error).toBeInstanceOf(LockTimeoutError);
    expect(seen).toEqual([
      ["contended", { name: "jobs" }],
      ["waitStarted", { name: "jobs" }],
      ["waitEnded", { name: "jobs", waitedMs: 500, outcome: "timeout" }],
      ["acquireFailed", { name: "jobs", error: waiting.error, waitedMs: 500, attempts: 1 }],
    ]);
  });

  it("a wait the caller cancels ends as aborted, with the signal's reason", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs).acquire("jobs");
    const events = recordEvents(coordinator, ["waitEnded", "acquireFailed"]);
    const cancel = new AbortController();
    const waiting = track(coordinator.acquire("jobs", { signal: cancel.signal }));
    await clock.advance(40);
    const reason = new Error("shutting down");
    cancel.abort(reason);
    await flush();
    expect(waiting.error).toBe(reason);
    expect(events.waitEnded).toEqual([{ name: "jobs", waitedMs: 40, outcome: "aborted" }]);
    expect(events.acquireFailed).toEqual([
      { name: "jobs", error: reason, waitedMs: 40, attempts: 1 },
    ]);
  });

  it("a wait that close() ends is aborted", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs).acquire("jobs");
    const events = recordEvents(coordinator, ["waitEnded"]);
    const waiting = track(coordinator.acquire("jobs"));
    await flush();
    await coordinator.close();
    await flush();
    expect(waiting.status).toBe("rejected");
    expect(events.waitEnded).toEqual([{ name: "jobs", waitedMs: 0, outcome: "aborted" }]);
  });

  it("a try that finds the lock held is contended and never waits", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    await rival(clock, backend, ttlMs).acquire("jobs");
    const seen = recordInOrder(coordinator);
    expect(await coordinator.tryAcquire("jobs")).toBeNull();
    expect(seen).toEqual([["contended", { name: "jobs" }]]);
    const error = await rejectionOf(coordinator.acquire("jobs", { waitMs: 0 }));
    expect(error).toBeInstanceOf(LockHeldError);
    expect(seen.slice(1)).toEqual([
      ["contended", { name: "jobs" }],
      ["acquireFailed", { name: "jobs", error, waitedMs: 0, attempts: 1 }],
    ]);
  });

  it("an acquire behind another of this process is contended and waits once", async () => {
    const { coordinator } = setup();
    const first = await coordinator.acquire("jobs");
    const seen = recordInOrder(coordinator);
    const second = track(coordinator.acquire("jobs"));
    await flush();
    expect(seen).toEqual([
      ["contended", { name: "jobs" }],
      ["waitStarted", { name: "jobs" }],
    ]);
    await first.release();
    await flush();
    expect(second.value?.held).toBe(true);
    expect(seen.map(([event]) => event)).toEqual([
      "contended",
      "waitStarted",
      "waitEnded",
      "acquired",
    ]);
  });

  it("attempts counts the store's answers: a transient failure, then the grant", async () => {
    const { clock, backend, coordinator } = setup();
    let failures = 1;
    backend.hooks.acquire = async (_key, _options, next) => {
      if (failures-- > 0) throw Object.assign(new Error("ECONNRESET"), { code: "ECONNRESET" });
      return next();
    };
    const events = recordEvents(coordinator, ["acquired", "contended", "waitStarted"]);
    const acquiring = track(coordinator.acquire("jobs"));
    await clock.advance(1_000);
    await flush();
    expect(acquiring.value?.held).toBe(true);
    expect(events.acquired[0]?.attempts).toBe(2);
    // A failure to reach the store is no contention.
    expect(events.contended).toEqual([]);
    expect(events.waitStarted).toEqual([]);
  });

  it("an acquire on a closed coordinator fails with no attempt", async () => {
    const { coordinator } = setup();
    const events = recordEvents(coordinator, ["acquireFailed"]);
    await coordinator.close();
    const error = await rejectionOf(coordinator.acquire("jobs"));
    expect(events.acquireFailed).toEqual([{ name: "jobs", error, waitedMs: 0, attempts: 0 }]);
  });

  it("semaphore permits and read-write locks emit the same events", async () => {
    const { coordinator } = setup();
    const memory = createCoordinator({ url: "memory://acquire-signals-permits" });
    const other = createCoordinator({ url: "memory://acquire-signals-permits" });
    try {
      const seen = recordInOrder(memory);
      const exports = memory.semaphore("exports", { permits: 1 });
      const held = await other.semaphore("exports", { permits: 1 }).acquire();
      const waiting = exports.acquire();
      await flush();
      expect(seen).toEqual([
        ["contended", { name: "exports" }],
        ["waitStarted", { name: "exports" }],
      ]);
      await held.release();
      const permit = await waiting;
      expect(seen.map(([event]) => event)).toEqual([
        "contended",
        "waitStarted",
        "waitEnded",
        "acquired",
      ]);
      await permit.release();
      const write = await other.readWriteLock("catalog").write();
      expect(await memory.readWriteLock("catalog").tryRead()).toBeNull();
      expect(seen.at(-1)).toEqual(["contended", { name: "catalog" }]);
      await write.release();
    } finally {
      await Promise.all([memory.close(), other.close(), coordinator.close()]);
    }
  });
});
