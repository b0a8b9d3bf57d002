import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  LockHeldError,
  LockTimeoutError,
  SessionLostError,
} from "../../src/index.js";
import {
  expectError,
  failOnUnhandledRejections,
  flush,
  rejectionOf,
  setup,
  track,
} from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

/** An error as Node.js reports a failed connection: `code` names the system error. */
function networkError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:6379`), { code });
}

describe("transient backend failures during acquire", () => {
  it("a network error from the backend is retried with backoff while waiting", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const attempts: number[] = [];
    backend.hooks.acquire = async (_key, _options, next) => {
      attempts.push(clock.now());
      if (attempts.length <= 3) throw networkError("ECONNRESET");
      return await next();
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await flush();
    // One attempt, then a pause: no tight loop.
    expect(attempts).toEqual([0]);
    await clock.advance(9); // the first backoff is at least 10 ms
    expect(attempts).toEqual([0]);
    await clock.advance(2_000);
    expect(pending.status).toBe("fulfilled");
    expect(attempts).toHaveLength(4);
    // Every retry waited, and the waits grow.
    const gaps = attempts.slice(1).map((t, i) => t - (attempts[i] as number));
    expect(gaps.every((g) => g >= 10)).toBe(true);
    expect(gaps[2] as number).toBeGreaterThan(gaps[0] as number);
  });

  it("reports BackendUnavailableError, not LockTimeoutError, when the store never answers within waitMs", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const cause = networkError("ECONNREFUSED");
    backend.hooks.acquire = async () => {
      throw cause;
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 3_000 }));
    await clock.advance(2_999);
    expect(pending.status).toBe("pending");
    await clock.advance(1);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
    expect(pending.error).not.toBeInstanceOf(LockTimeoutError);
    expect(backend.calls.acquire).toBeGreaterThan(3);
  });

  it("one early blip does not turn a lock that stayed held into BackendUnavailableError", async () => {
    // The store answered every later attempt with "held": the wait ran out because of the
    // holder, so it is a LockTimeoutError.
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const rivalBackend = new ScriptedBackend({ clock, store: backend.inner.store });
    const rival = createCoordinator({ backend: rivalBackend, clock, ttlMs });
    await rival.acquire("jobs", { waitMs: 0 });
    let blips = 1;
    backend.hooks.acquire = async (_key, _options, next) => {
      if (blips-- > 0) throw networkError("ECONNRESET");
      return await next();
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 3_000 }));
    await clock.advance(3_000);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(LockTimeoutError);
  });

  it("with waitMs 0 a transient error is reported at once as BackendUnavailableError, never as held", async () => {
    const { backend, coordinator } = setup();
    const cause = networkError("ECONNRESET");
    backend.hooks.acquire = async () => {
      throw cause;
    };
    const error = await rejectionOf(coordinator.acquire("jobs", { waitMs: 0 }));
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect(error).not.toBeInstanceOf(LockHeldError);
    expect((error as Error).cause).toBe(cause);
    expect(backend.calls.acquire).toBe(1);
  });

  it("tryAcquire reports a transient error as BackendUnavailableError, not null", async () => {
    const { backend, coordinator } = setup();
    backend.hooks.acquire = async () => {
      throw new BackendUnavailableError("no quorum");
    };
    await expect(coordinator.tryAcquire("jobs")).rejects.toBeInstanceOf(BackendUnavailableError);
  });

  it("a ConfigError from the backend is not retried", async () => {
    const { backend, coordinator } = setup();
    backend.hooks.acquire = async () => {
      throw new ConfigError("ttlMs", "the store needs at least 2000");
    };
    await expect(coordinator.acquire("jobs", { waitMs: 5_000 })).rejects.toBeInstanceOf(
      ConfigError,
    );
    expect(backend.calls.acquire).toBe(1);
  });

  it("the lock is usable after a run of transient errors", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    let failures = 2;
    backend.hooks.acquire = async (_key, _options, next) => {
      if (failures-- > 0) throw networkError("ECONNRESET");
      return await next();
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await clock.advance(1_000);
    const lock = pending.value;
    expect(lock?.held).toBe(true);
    await clock.advance(5_000);
    expect(lock?.held).toBe(true);
    expect(await lock?.release()).toBe(true);
  });

  it("a session that cannot be opened for a moment is retried while waiting", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    let failures = 1;
    backend.hooks.openSession = async (_options, next) => {
      if (failures-- > 0) throw new BackendUnavailableError("connect ECONNREFUSED");
      return await next();
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 10_000 }));
    await clock.advance(2_000);
    expect(pending.status).toBe("fulfilled");
    expect(backend.calls.openSession).toBe(2);
  });

  it("a store that never opens a session within waitMs is BackendUnavailableError, not LockTimeoutError", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    backend.hooks.openSession = () => new Promise(() => undefined);
    const pending = track(coordinator.acquire("jobs", { waitMs: 1_000 }));
    await clock.advance(1_000);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
  });

  it("tryAcquire against a store that never opens a session rejects within one TTL", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.openSession = () => new Promise(() => undefined);
    const pending = track(coordinator.tryAcquire("jobs"));
    await clock.advance(ttlMs);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
  });

  it("a backend acquire that never answers (and ignores the signal) cannot hang tryAcquire", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.acquire = () => new Promise(() => undefined);
    const pending = track(coordinator.tryAcquire("jobs"));
    await clock.advance(ttlMs);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
  });

  it("a backend acquire that never answers (and ignores the signal) cannot hang a waiting acquire, and is not reported as held", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    backend.hooks.acquire = () => new Promise(() => undefined);
    const pending = track(coordinator.acquire("jobs", { waitMs: 2_000 }));
    await clock.advance(2_000);
    expect(pending.status).toBe("rejected");
    // Nothing ever said the lock was held: the store did not answer.
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
    expect((pending.error as Error).message).toContain('did not answer for "jobs"');
  });

  it("a backend that begins a blocking wait (it reads the signal) and is never granted: LockTimeoutError", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    backend.hooks.acquire = (_key, options) => {
      // A backend reads the signal only when it is about to wait: the lock is held.
      void options.signal;
      return new Promise(() => undefined);
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 2_000 }));
    await clock.advance(2_000);
    expect(pending.error).toBeInstanceOf(LockTimeoutError);
  });

  it("a backend whose every acquire says SessionLostError does not spin: attempts are bounded and spaced", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const attemptsAt: number[] = [];
    backend.hooks.acquire = async () => {
      attemptsAt.push(clock.now());
      // Guard so a spinning loop ends (as a different error) instead of hanging the test.
      if (attemptsAt.length > 50) throw new ConfigError("guard", "spun");
      throw new SessionLostError("session vanished");
    };
    const attempt = track(coordinator.acquire("jobs", { waitMs: 0 }));
    await flush(50);
    expect(attempt.status).toBe("rejected");
    expect(attempt.error).not.toMatchObject({ field: "guard" });
    expect(
      attempt.error instanceof SessionLostError || attempt.error instanceof BackendUnavailableError,
    ).toBe(true);
    expect(attemptsAt.length).toBeLessThanOrEqual(3);

    attemptsAt.length = 0;
    const waiting = track(coordinator.acquire("jobs", { waitMs: 1_000 }));
    await flush(50);
    // Without time passing, a waiting acquire tries again at most a few times.
    expect(attemptsAt.filter((t) => t === clock.now()).length).toBeLessThanOrEqual(3);
    await clock.advance(1_000);
    expect(waiting.status).toBe("rejected");
  });

  it("an error not known to be transient (a URIError) rejects at once, not after the wait", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const bug = new URIError("URI malformed");
    backend.hooks.acquire = async () => {
      throw bug;
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 60_000 }));
    await flush();
    await clock.advance(0);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBe(bug);
    expect(backend.calls.acquire).toBe(1);
  });
});

describe("a store that cannot be reached fails in a bounded time shorter than the wait", () => {
  it("refused connections: BackendUnavailableError after one TTL (at least 5 s), not after waitMs", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const refused = networkError("ECONNREFUSED");
    backend.hooks.openSession = async () => {
      throw new BackendUnavailableError("redis: could not connect to 127.0.0.1:6390", {
        cause: refused,
      });
    };
    const pending = track(coordinator.acquire("jobs", { waitMs: 60_000 }));
    await clock.advance(4_000);
    expect(pending.status).toBe("pending"); // still retrying: an outage may pass
    await clock.advance(2_000);
    expect(pending.status).toBe("rejected");
    const error = expectError(pending.error, BackendUnavailableError);
    expect(error.message).toContain("127.0.0.1:6390"); // where
    expect(error.message).toMatch(/Gave up after 5\d{3} ms of failed attempts/);
    expect(error.message).toMatch(/check that the store is running/i); // what to do
    expect(error.cause).toBeInstanceOf(BackendUnavailableError);
    expect(backend.calls.openSession).toBeGreaterThan(3);
  });

  it("the bound is one TTL when the TTL is longer than 5 s (the default 15 s before a 60 s wait)", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 15_000 });
    backend.hooks.openSession = async () => {
      throw new BackendUnavailableError("etcd: no member answered (127.0.0.1:2390)");
    };
    const pending = track(coordinator.acquire("jobs"));
    await clock.advance(14_000);
    expect(pending.status).toBe("pending");
    await clock.advance(2_000);
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
  });

  it("an open that never answers is given up after the same bound, counted from its start", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    backend.hooks.openSession = () => new Promise(() => undefined);
    const pending = track(coordinator.acquire("jobs", { waitMs: 60_000 }));
    await clock.advance(5_000);
    await flush();
    expect(pending.status).toBe("rejected");
    expect(pending.error).toBeInstanceOf(BackendUnavailableError);
  });

  it("a store that answers but keeps the lock held still waits the whole waitMs", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const rival = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    await rival.acquire("jobs", { waitMs: 0 });
    const pending = track(coordinator.acquire("jobs", { waitMs: 20_000 }));
    await clock.advance(19_000);
    expect(pending.status).toBe("pending");
    await clock.advance(1_000);
    expect(pending.error).toBeInstanceOf(LockTimeoutError);
  });
});

describe("a waiter whose session ends as its wait runs out", () => {
  it("is a LockTimeoutError (the lock stayed held elsewhere), not SessionLostError", async () => {
    // A waiter frozen (SIGSTOP) past its wait and its session wakes with both overdue: the
    // session's end can arrive before the wait's timer runs.
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const rival = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    await rival.acquire("jobs", { waitMs: 0 });
    let endSession: ((error: unknown) => void) | undefined;
    backend.hooks.acquire = (_key, _options, next) =>
      new Promise((resolve, reject) => {
        endSession = reject;
        next().then(resolve, reject);
      });
    const pending = track(coordinator.acquire("jobs", { waitMs: 3_000 }));
    await clock.advance(2_999);
    endSession?.(new SessionLostError("the ZooKeeper session was closed"));
    await flush();
    await clock.advance(1);
    await flush();
    expect(pending.status).toBe("rejected");
    const error = expectError(pending.error, LockTimeoutError, { lockName: "jobs", waitMs: 3_000 });
    expect(error.cause).toBeInstanceOf(SessionLostError);
  });
});
