import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  type Fence,
  LockLostError,
  ManualClock,
} from "../../src/index.js";
import {
  failOnUnhandledRejections,
  recordEvents,
  rejectionOf,
  setup,
  track,
} from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

describe("a TTL per lock", () => {
  it("a lock acquired with its own ttlMs lives on a session of that TTL, renewed every third of it", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const opened = recordEvents(coordinator, ["sessionOpened"]).sessionOpened;
    const short = await coordinator.acquire("short", { waitMs: 0 });
    const long = await coordinator.acquire("long", { waitMs: 0, ttlMs: 9_000 });
    const alsoLong = await coordinator.tryAcquire("also-long", { ttlMs: 9_000 });
    expect(opened.map((o) => o.ttlMs)).toEqual([1_000, 9_000]);
    expect(short.ttlMs).toBe(1_000);
    expect(long.ttlMs).toBe(9_000);
    expect(alsoLong?.ttlMs).toBe(9_000);
    expect(long.remainingMs()).toBeGreaterThan(8_000);

    // One keepalive per session per interval, whatever the number of locks on it.
    const before = backend.keepAlives.length;
    await clock.advance(9_000);
    const perSession = [0, 1].map(
      (s) => backend.keepAlives.slice(before).filter((k) => k.session === s).length,
    );
    expect(perSession).toEqual([27, 3]);
    expect([short.held, long.held, alsoLong?.held]).toEqual([true, true, true]);
  });

  it("withLock takes ttlMs too, and ttlMs equal to the coordinator's shares its session", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    const seen = await coordinator.withLock("jobs", ({ lock }) => lock.ttlMs, { ttlMs: 4_000 });
    expect(seen).toBe(4_000);
    await coordinator.acquire("same", { waitMs: 0, ttlMs: 1_000 });
    await coordinator.acquire("default", { waitMs: 0 });
    expect(backend.sessions.map((s) => s.ttlMs).sort()).toEqual([1_000, 4_000]);
  });

  it("a lock's TTL session lost takes only its locks; the next acquire opens a new one", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    const short = await coordinator.acquire("short", { waitMs: 0 });
    const long = await coordinator.acquire("long", { waitMs: 0, ttlMs: 6_000 });
    const longSession = backend.sessions.find((s) => s.ttlMs === 6_000);
    longSession?.loseNow(new Error("expired") as never);
    expect(long.held).toBe(false);
    expect(long.lostReason).toBe("session-lost");
    expect(short.held).toBe(true);
    const again = await coordinator.acquire("long", { waitMs: 0, ttlMs: 6_000 });
    expect(again.held).toBe(true);
    expect(backend.sessions.filter((s) => s.ttlMs === 6_000)).toHaveLength(2);
  });

  it("rejects a bad ttlMs with ConfigError before any I/O", async () => {
    const { backend, coordinator } = setup();
    for (const ttlMs of [0, 5, -1, 1.5, Number.NaN, "5000", 86_400_001]) {
      const error = await rejectionOf(
        coordinator.acquire("jobs", { ttlMs: ttlMs as number, waitMs: 0 }),
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("ttlMs");
      await expect(coordinator.tryAcquire("jobs", { ttlMs: ttlMs as number })).rejects.toThrow(
        ConfigError,
      );
    }
    expect(backend.calls.openSession).toBe(0);
  });

  it("at most 8 TTLs besides the coordinator's: a ninth is a ConfigError naming them", async () => {
    const { coordinator } = setup({ ttlMs: 1_000 });
    for (let i = 1; i <= 8; i++) {
      await coordinator.acquire(`l${i}`, { waitMs: 0, ttlMs: 1_000 + i * 100 });
    }
    const error = await rejectionOf(coordinator.acquire("l9", { waitMs: 0, ttlMs: 5_000 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain("1100");
    // A TTL already in use is fine.
    expect((await coordinator.acquire("l10", { waitMs: 0, ttlMs: 1_100 })).held).toBe(true);
  });

  it("close() releases every lock and closes every TTL's session", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    const a = await coordinator.acquire("a", { waitMs: 0 });
    const b = await coordinator.acquire("b", { waitMs: 0, ttlMs: 3_000 });
    await coordinator.close();
    expect([a.held, b.held]).toEqual([false, false]);
    expect(backend.calls.closeSession).toBe(2);
    expect(backend.calls.release).toBe(2);
  });
});

describe("lock.extend()", () => {
  it("renews now: the deadline moves to a full TTL from the renewal, for every lock of the session", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 3_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const other = await coordinator.acquire("other", { waitMs: 0 });
    await clock.advance(900);
    const calls = backend.calls.keepAlive;
    const left = await lock.extend();
    expect(backend.calls.keepAlive).toBe(calls + 1);
    expect(left).toBe(lock.remainingMs());
    expect(left).toBeGreaterThan(2_900);
    expect(other.remainingMs()).toBe(left);
    // The interval runs from that renewal: the next one comes a third of the TTL later.
    await clock.advance(999);
    expect(backend.calls.keepAlive).toBe(calls + 1);
    await clock.advance(1);
    expect(backend.calls.keepAlive).toBe(calls + 2);
  });

  it("extend(ms) makes no round trip while at least ms are left, and renews when fewer are", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 3_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const calls = backend.calls.keepAlive;
    expect(await lock.extend(2_000)).toBeGreaterThanOrEqual(2_000);
    expect(backend.calls.keepAlive).toBe(calls);
    await clock.advance(500);
    expect(await lock.extend(2_900)).toBeGreaterThanOrEqual(2_900);
    expect(backend.calls.keepAlive).toBe(calls + 1);
  });

  it("extend(ms) beyond the TTL less the drift allowance is a ConfigError saying to use ttlMs", async () => {
    const { backend, coordinator } = setup({ ttlMs: 3_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    for (const ms of [0, -5, 1.5, 2_999, 60_000]) {
      const error = await rejectionOf(lock.extend(ms));
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain("ttlMs");
    }
    // 3000 ms less the 32 ms drift allowance: the longest, and just granted, so no round trip.
    expect(await lock.extend(3_000 - 32)).toBe(3_000 - 32);
    expect(backend.calls.keepAlive).toBe(0);
  });

  it("waits out a renewal in flight, then renews again (never two at once)", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 3_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let answer!: () => void;
    backend.hooks.keepAlive = async (_session, next) => {
      await new Promise<void>((resolve) => {
        answer = resolve;
      });
      return await next();
    };
    await clock.advance(1_000); // the loop's renewal starts and hangs
    const extended = track(lock.extend());
    await clock.advance(10);
    expect(extended.status).toBe("pending");
    answer(); // the loop's renewal answers; extend's starts
    await clock.advance(10);
    expect(backend.calls.keepAlive).toBe(2);
    answer();
    await clock.advance(0);
    await extended.promise;
    expect(backend.maxKeepAliveInFlight).toBe(1);
  });

  it("rejects with BackendUnavailableError when the store does not confirm; the lock stays held", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 3_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let failures = 1;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failures-- > 0) throw new Error("blip");
      return await next();
    };
    const error = await rejectionOf(lock.extend());
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).message).toContain("keepalive keeps trying");
    expect(lock.held).toBe(true);
    await clock.advance(3_000);
    expect(lock.held).toBe(true);
  });

  it("rejects with the LockLostError once the lock is released or lost", async () => {
    const { backend, coordinator } = setup({ ttlMs: 3_000 });
    const released = await coordinator.acquire("a", { waitMs: 0 });
    await released.release();
    const error = await rejectionOf(released.extend());
    expect(error).toBeInstanceOf(LockLostError);
    expect((error as LockLostError).reason).toBe("released");

    const lost = await coordinator.acquire("b", { waitMs: 0 });
    backend.hooks.keepAlive = async () => ({ lostKeys: ["b"] });
    const lostError = await rejectionOf(lost.extend());
    expect(lostError).toBeInstanceOf(LockLostError);
    expect((lostError as LockLostError).reason).toBe("key-lost");
  });
});

describe("a TTL per lock in correctness mode", () => {
  it("the fence raise is told the lock's own TTL", async () => {
    const clock = new ManualClock();
    const seen: (number | undefined)[] = [];
    const fence: Fence = {
      raise: async (_resource, _token, options) => {
        seen.push(options?.ttlMs);
      },
    };
    const coordinator = createCoordinator({
      backend: new ScriptedBackend({ clock }),
      clock,
      ttlMs: 1_000,
      mode: "correctness",
      fence,
    });
    await coordinator.acquire("invoices", { waitMs: 0 });
    await coordinator.acquire("ledger", { waitMs: 0, ttlMs: 4_000 });
    expect(seen).toEqual([1_000, 4_000]);
  });
});
