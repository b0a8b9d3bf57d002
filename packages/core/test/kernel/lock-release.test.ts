import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  ConfigError,
  CoordinatorClosedError,
  createCoordinator,
  LockLostError,
  SessionLostError,
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

/** A connection reset, as Node reports one. */
const reset = () => Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });

describe("Lock.release", () => {
  it("resolves true, aborts the signal with reason released, and frees the lock at once", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(await lock.release()).toBe(true);
    expect(lock.held).toBe(false);
    const reason = lock.signal.reason as LockLostError;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(reason.reason).toBe("released");
    expect(lock.lostReason).toBe("released");
    expect(lock.remainingMs()).toBe(0);
    expect(await other.tryAcquire("jobs")).not.toBeNull();
  });

  it("is idempotent: every call returns the same promise and the backend is called once", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const first = lock.release();
    const second = lock.release();
    expect(second).toBe(first);
    expect(await first).toBe(true);
    expect(await lock.release()).toBe(true);
    expect(backend.calls.release).toBe(1);
  });

  it("returns false after the lock was lost, without a round trip", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.lastSession.loseNow(new SessionLostError("gone"));
    expect(await lock.release()).toBe(false);
    expect(backend.calls.release).toBe(0);
    // The signal keeps the reason of the loss, not "released".
    expect(lock.lostReason).toBe("session-lost");
  });

  it("await using releases on scope exit, also when the scope throws", async () => {
    const { backend, coordinator } = setup();
    let inner: { held: boolean; token: bigint } | undefined;
    {
      await using lock = await coordinator.acquire("jobs", { waitMs: 0 });
      inner = lock;
      expect(lock.held).toBe(true);
    }
    expect(inner?.held).toBe(false);
    expect(backend.calls.release).toBe(1);

    const failing = async () => {
      await using lock = await coordinator.acquire("jobs", { waitMs: 0 });
      inner = lock;
      throw new Error("work failed");
    };
    await expect(failing()).rejects.toThrow("work failed");
    expect(inner?.held).toBe(false);
    expect(await coordinator.holder("jobs")).toBeNull();
  });

  it("a release the store never answers rejects with BackendUnavailableError within one TTL", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.release = () => new Promise(() => undefined);
    const release = track(lock.release());
    await flush();
    expect(release.status).toBe("pending");
    await clock.advance(ttlMs);
    expect(release.status).toBe("rejected");
    expect(release.error).toBeInstanceOf(BackendUnavailableError);
    expect((release.error as Error).message).toMatch(/"jobs"/);
    // The caller must not go on trusting it.
    expect(lock.held).toBe(false);
  });

  it("a release that fails reports BackendUnavailableError with the cause", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const cause = new Error("ECONNRESET");
    backend.hooks.release = async () => {
      throw cause;
    };
    const error = await rejectionOf(lock.release());
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).cause).toBe(cause);
    expect(lock.held).toBe(false);
  });

  it("a release whose connection resets on the way is sent once more and resolves true", async () => {
    const { backend, coordinator } = setup();
    const events = recordEvents(coordinator, ["released"]);
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let attempts = 0;
    backend.hooks.release = async (_grant, next) => {
      attempts++;
      if (attempts === 1) throw reset();
      return next();
    };
    expect(await lock.release()).toBe(true);
    expect(backend.calls.release).toBe(2);
    expect(events.released.map((e) => e.wasHeld)).toEqual([true]);
    expect(await coordinator.holder("jobs")).toBeNull();
    // Freed in the store: the name is taken again at once.
    expect(await coordinator.tryAcquire("jobs")).not.toBeNull();
  });

  it("a release whose first attempt freed the lock before its reply was lost resolves false on the second", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let attempts = 0;
    backend.hooks.release = async (_grant, next) => {
      attempts++;
      const wasHeld = await next();
      if (attempts === 1) throw reset();
      return wasHeld;
    };
    expect(await lock.release()).toBe(false);
    expect(backend.calls.release).toBe(2);
    expect(await coordinator.tryAcquire("jobs")).not.toBeNull();
  });

  it("a release that fails twice on the way rejects with BackendUnavailableError, after two attempts only", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    const second = reset();
    let attempts = 0;
    backend.hooks.release = async () => {
      attempts++;
      throw attempts === 1 ? reset() : second;
    };
    const error = await rejectionOf(lock.release());
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).cause).toBe(second);
    expect(backend.calls.release).toBe(2);
  });

  it("a release that fails with an error not known to pass is not sent again", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.release = async () => {
      throw new TypeError("bad grant");
    };
    expect(await rejectionOf(lock.release())).toBeInstanceOf(BackendUnavailableError);
    expect(backend.calls.release).toBe(1);
  });

  it("a second attempt the store never answers still rejects within one TTL of the release", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let attempts = 0;
    backend.hooks.release = async () => {
      attempts++;
      if (attempts === 1) throw reset();
      return new Promise<boolean>(() => undefined);
    };
    const release = track(lock.release());
    await clock.advance(ttlMs - 1);
    expect(release.status).toBe("pending");
    await clock.advance(1);
    expect(release.status).toBe("rejected");
    expect(release.error).toBeInstanceOf(BackendUnavailableError);
    expect(backend.calls.release).toBe(2);
  });

  it("after a failed release, acquiring the name again waits for the old grant to end instead of re-acquiring a key the session still holds", async () => {
    // A backend that honours the contract: a failed release is no longer renewed and ends
    // by expiry within one TTL. Core must not call acquire for that key on the same session
    // while the store still has it (BackendSession.acquire: "Core never calls it twice for
    // the same key on one session before the first grant is released or lost").
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.release = async (_grant, next) => {
      clock.setTimer(() => void next(), ttlMs); // expires by itself within one TTL
      throw new Error("ECONNRESET");
    };
    await expect(lock.release()).rejects.toBeInstanceOf(BackendUnavailableError);
    delete backend.hooks.release;

    const again = track(coordinator.acquire("jobs", { waitMs: 5 * ttlMs }));
    await clock.advance(2 * ttlMs);
    expect(again.status).toBe("fulfilled");
    expect(backend.violations).toEqual([]);
  });
});

describe("Coordinator.close", () => {
  it("releases every held lock, frees them in the store and refuses later acquires", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    const events = recordEvents(coordinator, ["released"]);
    const a = await coordinator.acquire("a", { waitMs: 0 });
    const b = await coordinator.acquire("b", { waitMs: 0 });
    await coordinator.close();
    expect([a.held, b.held]).toEqual([false, false]);
    // Ended by close(), not by the holder: reason `closed`, on the signal and in lostReason.
    expect([a.lostReason, b.lostReason]).toEqual(["closed", "closed"]);
    expect(a.signal.reason).toBeInstanceOf(LockLostError);
    expect((a.signal.reason as LockLostError).reason).toBe("closed");
    expect(events.released.map((e) => e.name).sort()).toEqual(["a", "b"]);
    expect(backend.lastSession.closed).toBe(true);
    // A backend instance passed in is handed over: the coordinator closes it.
    expect(backend.closed).toBe(true);

    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    expect(await other.tryAcquire("a")).not.toBeNull();
    // Every call after close() rejects with its own class, never a ConfigError: closing is
    // not a configuration mistake, and alerts on ConfigError must not fire at each shutdown.
    const calls: Array<() => Promise<unknown>> = [
      () => coordinator.acquire("a", { waitMs: 0 }),
      () => coordinator.acquire("a"),
      () => coordinator.tryAcquire("a"),
      () => coordinator.withLock("a", () => 1),
      () => coordinator.holder("a"),
      () => coordinator.watch("a")[Symbol.asyncIterator]().next(),
      async () => coordinator.elect("a", { onElected: () => undefined }),
      async () => coordinator.partitions("a", { count: 2, onAssigned: () => undefined }),
    ];
    for (const call of calls) {
      const error = await rejectionOf(call());
      expect(error).toBeInstanceOf(CoordinatorClosedError);
      expect(error).not.toBeInstanceOf(ConfigError);
      expect(error).toMatchObject({ code: "BATON_CLOSED" });
      expect((error as Error).message).toContain("closed");
    }
    await coordinator.close(); // idempotent
  });

  it("close() ends a waiting acquire with CoordinatorClosedError and opens no new session", async () => {
    const { clock, backend, coordinator, ttlMs } = setup();
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    await other.acquire("jobs", { waitMs: 0 });
    const waiting = track(coordinator.acquire("jobs", { waitMs: 60_000 }));
    await flush();
    expect(backend.calls.openSession).toBe(1);
    await coordinator.close();
    await flush();
    expect(waiting.status).toBe("rejected");
    expect(waiting.error).toBeInstanceOf(CoordinatorClosedError);
    expect(waiting.error).toMatchObject({ code: "BATON_CLOSED" });
    expect(backend.calls.openSession).toBe(1);
  });

  it("close resolves even when a release fails", async () => {
    const { backend, coordinator } = setup();
    const lock = await coordinator.acquire("a", { waitMs: 0 });
    backend.hooks.release = async () => {
      throw new Error("ECONNRESET");
    };
    await coordinator.close();
    expect(lock.held).toBe(false);
  });
});
