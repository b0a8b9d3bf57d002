import { describe, expect, it } from "vitest";
import { LockLostError, SessionLostError } from "../../src/index.js";
import { advanceTo, failOnUnhandledRejections, recordEvents, setup } from "../support/helpers.js";

failOnUnhandledRejections();

describe("session and key loss", () => {
  it("keepAlive throwing SessionLostError aborts every lock at once with reason session-lost", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["lost", "sessionLost"]);
    const a = await coordinator.acquire("a", { waitMs: 0 });
    const b = await coordinator.acquire("b", { waitMs: 0 });
    const cause = new SessionLostError("lease 42 expired");
    backend.hooks.keepAlive = async () => {
      throw cause;
    };

    await advanceTo(clock, 332);
    expect([a.held, b.held]).toEqual([true, true]);
    await advanceTo(clock, 333); // the first renewal
    for (const lock of [a, b]) {
      const reason = lock.signal.reason as LockLostError;
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason.reason).toBe("session-lost");
      expect(reason.cause).toBe(cause);
    }
    expect(events.lost.map((e) => e.name).sort()).toEqual(["a", "b"]);
    expect(events.sessionLost).toEqual([{ error: cause }]);
    expect(backend.lastSession.closed).toBe(true);
  });

  it("lostKeys from keepAlive aborts only those locks with reason key-lost", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["lost", "renewed"]);
    const a = await coordinator.acquire("a", { waitMs: 0 });
    const b = await coordinator.acquire("b", { waitMs: 0 });
    let reported = false;
    backend.hooks.keepAlive = async (_session, next) => {
      await next();
      if (reported) return undefined;
      reported = true;
      return { lostKeys: ["a"] };
    };

    await advanceTo(clock, 333);
    expect(a.lostReason).toBe("key-lost");
    expect((a.signal.reason as LockLostError).token).toBe(a.token);
    expect(b.held).toBe(true);
    expect(events.lost).toMatchObject([{ name: "a", reason: "key-lost", token: a.token }]);
    expect(events.renewed.at(-1)?.locks).toBe(1);

    // The other lock lives on through later renewals.
    await clock.advance(5_000);
    expect(b.held).toBe(true);
    // Releasing the lost one says it was not ours, without a round trip.
    const releasesBefore = backend.calls.release;
    expect(await a.release()).toBe(false);
    expect(backend.calls.release).toBe(releasesBefore);
  });

  it("the backend session's lost signal aborts its locks with reason session-lost", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["sessionLost"]);
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const cause = new SessionLostError("connection closed");
    backend.lastSession.loseNow(cause);
    expect(lock.held).toBe(false);
    expect(lock.lostReason).toBe("session-lost");
    expect((lock.signal.reason as LockLostError).cause).toBe(cause);
    expect(events.sessionLost).toHaveLength(1);
    expect(await lock.release()).toBe(false);
  });

  it("after a loss, a new acquire opens a new session and gets a greater token", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const first = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.lastSession.loseNow(new SessionLostError("gone"));
    const second = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(backend.calls.openSession).toBe(2);
    expect(backend.sessions[0]?.closed).toBe(true);
    expect(second.token).toBeGreaterThan(first.token);
    expect(second.held).toBe(true);
    await clock.advance(5_000);
    expect(second.held).toBe(true);
    expect(first.lostReason).toBe("session-lost");
  });

  it("a loss frees the name in this process: a waiting acquire on the same coordinator proceeds", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    const first = await coordinator.acquire("jobs", { waitMs: 0 });
    const waiting = coordinator.acquire("jobs", { waitMs: 500 });
    backend.lastSession.loseNow(new SessionLostError("gone"));
    const second = await waiting;
    expect(first.held).toBe(false);
    expect(second.held).toBe(true);
    expect(second.token).toBeGreaterThan(first.token);
  });
});
