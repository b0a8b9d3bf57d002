import { describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  type CoordinatorOptions,
  createCoordinator,
  type Logger,
  ManualClock,
  MemoryBackend,
  SessionLostError,
} from "../../src/index.js";
import {
  configErrorOf,
  failOnUnhandledRejections,
  flush,
  recordEvents,
  rejectionOf,
  track,
} from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

/** A coordinator on a ManualClock with a 1 s TTL, renewed every 300 ms, and its log. */
function setup(options: Partial<CoordinatorOptions> = {}) {
  const clock = new ManualClock();
  const backend = new ScriptedBackend({ clock });
  const warnings: string[] = [];
  const logger: Logger = { warn: (message) => warnings.push(message), error: () => undefined };
  const coordinator = createCoordinator({
    backend,
    clock,
    ttlMs: 1_000,
    renewEveryMs: 300,
    ownerId: "worker-1",
    logger,
    ...options,
  });
  return { clock, backend, coordinator, warnings };
}

/** Another coordinator (its own session) on the same store and clock. */
function rival(clock: ManualClock, backend: ScriptedBackend): Coordinator {
  return createCoordinator({
    backend: new ScriptedBackend({ clock, store: backend.inner.store }),
    clock,
    ttlMs: 1_000,
    ownerId: "rival",
  });
}

describe("warnHeldMs", () => {
  it("fires once for a lock held past it, however many renewals follow", async () => {
    const { clock, backend, coordinator, warnings } = setup({ warnHeldMs: 2_000 });
    const events = recordEvents(coordinator, ["heldTooLong", "renewed"]);
    await clock.advance(100);
    const lock = await coordinator.acquire("reports");
    await clock.advance(1_999);
    expect(events.heldTooLong).toEqual([]);
    await clock.advance(1);
    expect(events.heldTooLong).toEqual([
      {
        name: "reports",
        token: lock.token,
        ownerId: "worker-1",
        heldMs: 2_000,
        thresholdMs: 2_000,
        lock,
      },
    ]);
    await clock.advance(10_000);
    expect(lock.held).toBe(true);
    expect(backend.calls.keepAlive).toBeGreaterThan(30);
    expect(events.renewed.length).toBeGreaterThan(30);
    expect(events.heldTooLong).toHaveLength(1);
    expect(warnings).toEqual([
      'baton: lock "reports" (token 1) has been held by "worker-1" for 2000 ms, past warnHeldMs (2000 ms)',
    ]);
    await lock.release();
  });

  it("fires for each grant past it: a new grant of the name starts a new count", async () => {
    const { clock, coordinator } = setup({ warnHeldMs: 500 });
    const events = recordEvents(coordinator, ["heldTooLong"]);
    const first = await coordinator.acquire("reports");
    await clock.advance(600);
    await first.release();
    const second = await coordinator.acquire("reports");
    await clock.advance(499);
    expect(events.heldTooLong.map((e) => e.lock)).toEqual([first]);
    await clock.advance(1);
    expect(events.heldTooLong.map((e) => e.lock)).toEqual([first, second]);
    await second.release();
  });

  it("does not fire for a lock released, lost or closed before it", async () => {
    const { clock, backend, coordinator } = setup({ warnHeldMs: 500 });
    const events = recordEvents(coordinator, ["heldTooLong"]);
    const released = await coordinator.acquire("released");
    await clock.advance(499);
    await released.release();
    const lost = await coordinator.acquire("lost");
    backend.lastSession.loseNow(new SessionLostError("gone"));
    await flush();
    expect(lost.held).toBe(false);
    await coordinator.acquire("closed");
    await coordinator.close();
    await clock.advance(5_000);
    expect(events.heldTooLong).toEqual([]);
    // Every timer of those locks was cancelled with it.
    expect(clock.pendingTimers).toBe(0);
  });

  it("an acquire's own warnHeldMs overrides the coordinator's, and 0 turns it off", async () => {
    const { clock, coordinator } = setup({ warnHeldMs: 500 });
    const events = recordEvents(coordinator, ["heldTooLong"]);
    const longJob = await coordinator.acquire("long-job", { warnHeldMs: 3_000 });
    const quiet = await coordinator.tryAcquire("quiet", { warnHeldMs: 0 });
    await clock.advance(2_999);
    expect(events.heldTooLong).toEqual([]);
    await clock.advance(1);
    expect(events.heldTooLong.map((e) => [e.name, e.thresholdMs])).toEqual([["long-job", 3_000]]);
    await longJob.release();
    await quiet?.release();
  });

  it("fires for a semaphore's permit and a read-write lock's write", async () => {
    const clock = new ManualClock();
    const coordinator = createCoordinator({
      backend: new MemoryBackend({ clock }),
      clock,
      ttlMs: 1_000,
      warnHeldMs: 400,
    });
    const events = recordEvents(coordinator, ["heldTooLong"]);
    const permit = await coordinator.semaphore("exports", { permits: 2 }).acquire();
    const own = await coordinator.semaphore("imports", { permits: 2 }).acquire({ warnHeldMs: 600 });
    const write = await coordinator.readWriteLock("catalog").write({ warnHeldMs: 800 });
    await clock.advance(1_000);
    expect(events.heldTooLong.map((e) => [e.name, e.thresholdMs, e.lock])).toEqual([
      ["exports", 400, permit],
      ["imports", 600, own],
      ["catalog", 800, write],
    ]);
    await permit.release();
    await own.release();
    await write.release();
    await coordinator.close();
  });

  it("without a threshold, nothing fires and a held lock has no timer of its own", async () => {
    const { clock, coordinator, warnings } = setup();
    const events = recordEvents(coordinator, ["heldTooLong", "waitingTooLong"]);
    const warned = setup({ warnHeldMs: 120_000 });
    for (const name of ["a", "b", "c"]) {
      await coordinator.acquire(name);
      await warned.coordinator.acquire(name);
    }
    // The same locks with a threshold set: one timer more per lock, none without.
    expect(warned.clock.pendingTimers - clock.pendingTimers).toBe(3);
    await clock.advance(60_000);
    expect(events.heldTooLong).toEqual([]);
    expect(events.waitingTooLong).toEqual([]);
    expect(warnings).toEqual([]);
  });
});

describe("elections", () => {
  it("a leader's term and a follower's campaign never warn, whatever the coordinator's thresholds", async () => {
    const { clock, backend, coordinator, warnings } = setup({ warnHeldMs: 500, warnWaitMs: 500 });
    const follower = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs: 1_000,
      warnHeldMs: 500,
      warnWaitMs: 500,
    });
    const events = [coordinator, follower].map((c) =>
      recordEvents(c, ["heldTooLong", "waitingTooLong", "waitStarted"]),
    );
    const leader = coordinator.elect("scheduler", { onElected: () => undefined });
    await flush();
    expect(leader.isLeader).toBe(true);
    const other = follower.elect("scheduler", { onElected: () => undefined });
    await clock.advance(5_000);
    expect(leader.isLeader).toBe(true);
    // The follower did wait for the term, past warnWaitMs.
    expect(events[1]?.waitStarted.length).toBeGreaterThan(0);
    for (const e of events) {
      expect(e.heldTooLong).toEqual([]);
      expect(e.waitingTooLong).toEqual([]);
    }
    expect(warnings).toEqual([]);
    await other.close();
    await leader.close();
    await follower.close();
  });
});

describe("warnWaitMs", () => {
  it("fires once for an acquire still waiting past it", async () => {
    const { clock, backend, coordinator, warnings } = setup({ warnWaitMs: 1_000 });
    const events = recordEvents(coordinator, ["waitingTooLong"]);
    const holder = await rival(clock, backend).acquire("reports");
    const waiting = track(coordinator.acquire("reports", { waitMs: 30_000 }));
    await clock.advance(999);
    expect(events.waitingTooLong).toEqual([]);
    await clock.advance(1);
    await flush();
    // The warning names who is waited for, as the store tells at the threshold.
    expect(events.waitingTooLong).toEqual([
      {
        name: "reports",
        waitedMs: 1_000,
        thresholdMs: 1_000,
        holder: { ownerId: "rival", token: holder.token },
      },
    ]);
    await clock.advance(5_000);
    expect(events.waitingTooLong).toHaveLength(1);
    expect(warnings).toEqual([
      `baton: an acquire of "reports" has waited 1000 ms for the lock, held by "rival" (token ${holder.token}), past warnWaitMs (1000 ms), and still waits`,
    ]);
    await holder.release();
    await flush();
    expect(waiting.value?.held).toBe(true);
  });

  it("fires once per waiting acquire, and not for one granted before it", async () => {
    const { clock, backend, coordinator } = setup();
    const events = recordEvents(coordinator, ["waitingTooLong"]);
    const holder = await rival(clock, backend).acquire("reports");
    const quick = track(coordinator.acquire("reports", { warnWaitMs: 500 }));
    const slow = track(coordinator.acquire("reports", { warnWaitMs: 300 }));
    await clock.advance(200);
    await holder.release();
    await flush();
    expect(quick.value?.held).toBe(true);
    await clock.advance(2_000);
    await flush();
    expect(events.waitingTooLong).toEqual([
      {
        name: "reports",
        waitedMs: 300,
        thresholdMs: 300,
        holder: { ownerId: "worker-1", token: quick.value?.token },
      },
    ]);
    await quick.value?.release();
    await flush();
    expect(slow.value?.held).toBe(true);
    await clock.advance(2_000);
    expect(events.waitingTooLong).toHaveLength(1);
  });

  it("does not fire for a wait that ended first, nor with no threshold", async () => {
    const { clock, backend, coordinator } = setup({ warnWaitMs: 1_000 });
    const events = recordEvents(coordinator, ["waitingTooLong"]);
    await rival(clock, backend).acquire("reports");
    const timedOut = track(coordinator.acquire("reports", { waitMs: 900 }));
    const off = track(coordinator.acquire("other-name-held", { waitMs: 0 }));
    await clock.advance(900);
    expect(timedOut.status).toBe("rejected");
    expect(off.status).toBe("fulfilled");
    const unwarned = track(coordinator.acquire("reports", { waitMs: 5_000, warnWaitMs: 0 }));
    await clock.advance(6_000);
    expect(unwarned.status).toBe("rejected");
    expect(events.waitingTooLong).toEqual([]);
  });
});

describe("threshold options", () => {
  it("refuse values that are not whole milliseconds, naming the field", async () => {
    expect(configErrorOf({ url: "memory://", warnHeldMs: 0 }).field).toBe("warnHeldMs");
    expect(configErrorOf({ url: "memory://", warnHeldMs: 1.5 }).field).toBe("warnHeldMs");
    expect(configErrorOf({ url: "memory://", warnWaitMs: -1 }).field).toBe("warnWaitMs");
    expect(configErrorOf({ url: "memory://", warnWaitMs: "5s" }).field).toBe("warnWaitMs");
    const { coordinator } = setup();
    const held = await rejectionOf(coordinator.acquire("a", { warnHeldMs: -5 }));
    expect(held).toBeInstanceOf(ConfigError);
    expect(held).toMatchObject({ field: "warnHeldMs" });
    const wait = await rejectionOf(coordinator.acquire("a", { warnWaitMs: Number.NaN }));
    expect(wait).toMatchObject({ field: "warnWaitMs" });
    // A try does not wait: warnWaitMs is no option of it.
    const tried = await rejectionOf(
      coordinator.tryAcquire("a", { warnWaitMs: 5 } as Parameters<Coordinator["tryAcquire"]>[1]),
    );
    expect(tried).toMatchObject({ field: "options.warnWaitMs" });
  });
});
