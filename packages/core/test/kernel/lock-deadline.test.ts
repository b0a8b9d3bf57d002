import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  defaultDriftMs,
  LockLostError,
  SessionLostError,
} from "../../src/index.js";
import { advanceTo, failOnUnhandledRejections, recordEvents, setup } from "../support/helpers.js";
import type { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

/** Start time of the last keepAlive that was confirmed. */
function lastConfirmedStart(backend: ScriptedBackend): number {
  const ok = backend.keepAlives.filter((k) => k.outcome === "ok");
  const last = ok.at(-1);
  if (last === undefined) throw new Error("no confirmed renewal");
  return last.startedAt;
}

describe("the local deadline: a lock is not trusted past last confirmed renewal + ttl - drift", () => {
  it("aborts with reason deadline exactly at the deadline when renewals keep failing, not before", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["renewFailed", "lost", "sessionLost"]);
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await advanceTo(clock, 700); // two renewals confirmed (at 333 and 666)
    backend.hooks.keepAlive = async () => {
      throw new BackendUnavailableError("store unreachable");
    };

    const deadline = lastConfirmedStart(backend) + ttlMs - defaultDriftMs(ttlMs);
    expect(deadline).toBe(666 + 1_000 - 12);

    await advanceTo(clock, deadline - 1);
    expect(lock.held).toBe(true);
    expect(events.renewFailed.length).toBeGreaterThanOrEqual(2);
    const first = events.renewFailed[0];
    expect(first?.error).toBeInstanceOf(BackendUnavailableError);
    // The first failure (at 999) reports the time left before the deadline.
    expect(first?.remainingMs).toBe(deadline - 999);
    // Failures retry sooner than the normal interval.
    expect(backend.calls.keepAlive).toBeGreaterThan(4);

    await clock.advance(1);
    expect(lock.held).toBe(false);
    const reason = lock.signal.reason as LockLostError;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(reason).toMatchObject({ reason: "deadline", lockName: "jobs", token: lock.token });
    expect(lock.lostReason).toBe("deadline");
    expect(events.lost).toHaveLength(1);
    expect(events.sessionLost).toHaveLength(1);
    expect(lock.remainingMs()).toBe(0);
  });

  it("aborts at the deadline when a keepAlive never answers", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await advanceTo(clock, 400); // one renewal confirmed, at 333
    backend.hooks.keepAlive = () => new Promise(() => undefined);
    const deadline = 333 + ttlMs - defaultDriftMs(ttlMs);
    await advanceTo(clock, deadline - 1);
    expect(lock.held).toBe(true);
    await clock.advance(1);
    expect(lock.lostReason).toBe("deadline");
    // No second renewal was started while the first hung.
    expect(backend.maxKeepAliveInFlight).toBe(1);
  });

  it("aborts at the first deadline when the very first renewal fails", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.keepAlive = async () => {
      throw new Error("ECONNRESET");
    };
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    // The session was opened at 0: that is the last confirmed start.
    const deadline = ttlMs - defaultDriftMs(ttlMs);
    await advanceTo(clock, deadline - 1);
    expect(lock.held).toBe(true);
    await clock.advance(1);
    expect(lock.lostReason).toBe("deadline");
  });

  it("a short outage costs no lock: a retry that succeeds moves the deadline on", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["renewFailed", "lost"]);
    let failures = 2;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failures > 0) {
        failures--;
        throw new BackendUnavailableError("blip");
      }
      return await next();
    };
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(10 * ttlMs);
    expect(events.renewFailed).toHaveLength(2);
    expect(events.lost).toEqual([]);
    expect(lock.held).toBe(true);
  });

  it("after the deadline a new acquire opens a new session and gets a greater token", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.keepAlive = async () => {
      throw new BackendUnavailableError("down");
    };
    const lost = await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(ttlMs);
    expect(lost.lostReason).toBe("deadline");
    expect(await lost.release()).toBe(false);

    delete backend.hooks.keepAlive;
    const again = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(backend.calls.openSession).toBe(2);
    expect(again.token).toBeGreaterThan(lost.token);
    await clock.advance(5 * ttlMs);
    expect(again.held).toBe(true);
  });

  it("a renewal that fails with SessionLostError is not retried until the deadline", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.keepAlive = async () => {
      throw new SessionLostError("lease expired");
    };
    await advanceTo(clock, 333);
    expect(lock.lostReason).toBe("session-lost");
    await clock.advance(2_000);
    expect(backend.calls.keepAlive).toBe(1);
  });
});
