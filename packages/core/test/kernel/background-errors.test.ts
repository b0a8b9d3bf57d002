import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  ManualClock,
  SessionLostError,
} from "../../src/index.js";
import {
  failOnUnhandledRejections,
  flush,
  recordEvents,
  setup,
  track,
} from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

// Every test here ends by asserting that no failure in background work (renewals, closes of
// lost sessions, late opens, releases nobody awaits) became an unhandled rejection.
failOnUnhandledRejections();

describe("background failures are reported, never unhandled", () => {
  it("renewals failing until the deadline, then the close of the lost session failing", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["renewFailed", "backgroundError", "lost"]);
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.keepAlive = async () => {
      throw new Error("ECONNRESET");
    };
    backend.hooks.closeSession = async () => {
      throw new Error("ECONNRESET on close");
    };
    await clock.advance(2 * ttlMs);
    expect(lock.lostReason).toBe("deadline");
    expect(events.renewFailed.length).toBeGreaterThan(0);
    expect(events.backgroundError).toMatchObject([{ during: "closing a lost session" }]);
  });

  it("a keepAlive that hangs past the deadline and then rejects", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    let fail: ((error: unknown) => void) | undefined;
    backend.hooks.keepAlive = () =>
      new Promise((_resolve, reject) => {
        fail = reject;
      });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(2 * ttlMs);
    expect(lock.held).toBe(false);
    fail?.(new BackendUnavailableError("timed out at last"));
    await flush();
  });

  it("a keepAlive that hangs past the deadline and then succeeds does not revive the lock", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    let succeed: (() => void) | undefined;
    backend.hooks.keepAlive = (_session, next) =>
      new Promise((resolve) => {
        succeed = () => resolve(next());
      });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await clock.advance(2 * ttlMs);
    succeed?.();
    await clock.advance(ttlMs);
    expect(lock.lostReason).toBe("deadline");
  });

  it("SessionLostError from keepAlive while closing the session also fails", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const events = recordEvents(coordinator, ["backgroundError", "sessionLost"]);
    await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.keepAlive = async () => {
      throw new SessionLostError("lease gone");
    };
    backend.hooks.closeSession = async () => {
      throw new Error("already closed");
    };
    await clock.advance(1_000);
    expect(events.sessionLost).toHaveLength(1);
    expect(events.backgroundError).toHaveLength(1);
  });

  it("a session that opens after the caller gave up, and whose close fails", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    let finish: (() => void) | undefined;
    backend.hooks.openSession = async (_options, next) => {
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      return await next();
    };
    backend.hooks.closeSession = async () => {
      throw new Error("close failed");
    };
    const controller = new AbortController();
    const attempt = track(coordinator.acquire("jobs", { signal: controller.signal }));
    await flush();
    controller.abort(new Error("gave up"));
    await flush();
    expect(attempt.status).toBe("rejected");
    finish?.();
    await flush();
  });

  it("an open that rejects after the caller gave up", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    let fail: ((error: unknown) => void) | undefined;
    backend.hooks.openSession = () =>
      new Promise((_resolve, reject) => {
        fail = reject;
      });
    const controller = new AbortController();
    const attempt = track(coordinator.acquire("jobs", { signal: controller.signal }));
    await flush();
    controller.abort(new Error("gave up"));
    await flush();
    expect(attempt.status).toBe("rejected");
    fail?.(new Error("ECONNREFUSED"));
    await flush();
  });

  it("a release failing inside close()", async () => {
    const { backend, coordinator } = setup({ ttlMs: 1_000 });
    await coordinator.acquire("a", { waitMs: 0 });
    await coordinator.acquire("b", { waitMs: 0 });
    backend.hooks.release = async () => {
      throw new Error("ECONNRESET");
    };
    await coordinator.close();
  });

  it("the backend's lost signal firing while renewals also fail", async () => {
    const { clock, backend, coordinator } = setup({ ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    backend.hooks.keepAlive = async () => {
      throw new Error("ECONNRESET");
    };
    await clock.advance(400);
    backend.lastSession.loseNow(new SessionLostError("socket closed"));
    await clock.advance(2_000);
    expect(lock.lostReason).toBe("session-lost");
  });
});

function loggerSpy() {
  const lines: { level: string; message: string; details: unknown }[] = [];
  const at = (level: string) => (message: string, details?: unknown) => {
    lines.push({ level, message, details });
  };
  return { lines, logger: { debug: at("debug"), warn: at("warn"), error: at("error") } };
}

describe("every background error reaches the configured logger", () => {
  it("an elect()-only service whose campaign keeps failing logs each failure with its error", async () => {
    const clock = new ManualClock();
    const backend = new ScriptedBackend({ clock });
    const { lines, logger } = loggerSpy();
    const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000, logger });
    const failure = new ConfigError("url", 'unknown parameter "prefx"; use prefix');
    backend.hooks.acquire = async () => {
      throw failure;
    };
    let elected = false;
    const election = coordinator.elect("scheduler", {
      onElected: () => {
        elected = true;
      },
    });
    await flush();
    await clock.advance(10_000);
    await flush();
    expect(elected).toBe(false);
    const logged = lines.filter((l) => l.details === failure);
    expect(logged.length).toBeGreaterThan(0);
    expect(logged[0]?.message).toContain("campaigning");
    expect(logged[0]?.message).toContain("prefx");
    expect(logged[0]?.level).toBe("warn");
    await election.close();
    await coordinator.close();
  });

  it("nothing is logged for a coordinator without background failures", async () => {
    const clock = new ManualClock();
    const { lines, logger } = loggerSpy();
    const coordinator = createCoordinator({
      backend: new ScriptedBackend({ clock }),
      clock,
      ttlMs: 1_000,
      logger,
    });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await lock.release();
    await coordinator.close();
    expect(lines).toEqual([]);
  });
});
