import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  LockHeldError,
  LockLostError,
  SessionLostError,
} from "../../src/index.js";
import { failOnUnhandledRejections, recordEvents, rejectionOf, setup } from "../support/helpers.js";

failOnUnhandledRejections();

describe("withLock", () => {
  it("returns fn's result and passes it the signal, token and lock", async () => {
    const { coordinator } = setup();
    const result = await coordinator.withLock("jobs", ({ signal, token, lock }) => {
      expect(signal.aborted).toBe(false);
      expect(lock.token).toBe(token);
      expect(lock.signal).toBe(signal);
      return { billed: 600, token };
    });
    expect(result.billed).toBe(600);
    expect(typeof result.token).toBe("bigint");
  });

  it("holds the lock while fn runs and releases it after", async () => {
    const { backend, coordinator } = setup();
    let during: unknown;
    let lockSeen: { held: boolean } | undefined;
    await coordinator.withLock("jobs", async ({ lock }) => {
      lockSeen = lock;
      during = (await coordinator.holder("jobs"))?.ownerId;
    });
    expect(during).toBe(coordinator.ownerId);
    expect(lockSeen?.held).toBe(false);
    expect(backend.calls.release).toBe(1);
    expect(await coordinator.holder("jobs")).toBeNull();
  });

  it("releases when fn throws and rethrows fn's error", async () => {
    const { backend, coordinator } = setup();
    const failure = new Error("billing failed");
    const error = await rejectionOf(
      coordinator.withLock("jobs", async () => {
        throw failure;
      }),
    );
    expect(error).toBe(failure);
    expect(backend.calls.release).toBe(1);
    expect(await coordinator.holder("jobs")).toBeNull();
  });

  it("rethrows fn's error even when the release also fails, and reports the release failure", async () => {
    const { backend, coordinator } = setup();
    const events = recordEvents(coordinator, ["backgroundError"]);
    backend.hooks.release = async () => {
      throw new Error("ECONNRESET");
    };
    const failure = new Error("billing failed");
    const error = await rejectionOf(
      coordinator.withLock("jobs", () => {
        throw failure;
      }),
    );
    expect(error).toBe(failure);
    expect(events.backgroundError).toHaveLength(1);
    expect(events.backgroundError[0]?.error).toBeInstanceOf(BackendUnavailableError);
  });

  it("throws the release error when fn succeeds but the release fails", async () => {
    const { backend, coordinator } = setup();
    const cause = new Error("ECONNRESET");
    backend.hooks.release = async () => {
      throw cause;
    };
    const error = await rejectionOf(coordinator.withLock("jobs", () => "done"));
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).cause).toBe(cause);
  });

  it("rejects with LockLostError when the lock was lost while fn ran, even though fn resolved", async () => {
    const { backend, coordinator } = setup();
    let ran = false;
    const error = await rejectionOf(
      coordinator.withLock("jobs", async ({ signal }) => {
        backend.lastSession.loseNow(new SessionLostError("lease expired"));
        expect(signal.aborted).toBe(true);
        ran = true;
        return "done";
      }),
    );
    expect(ran).toBe(true);
    expect(error).toBeInstanceOf(LockLostError);
    expect(error).toMatchObject({ reason: "session-lost", lockName: "jobs" });
  });

  it("rejects with LockLostError when the deadline passed while fn ran", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    backend.hooks.keepAlive = async () => {
      throw new BackendUnavailableError("down");
    };
    const error = await rejectionOf(
      coordinator.withLock("jobs", async () => {
        await clock.advance(2 * ttlMs);
        return "done";
      }),
    );
    expect(error).toBeInstanceOf(LockLostError);
    expect(error).toMatchObject({ reason: "deadline" });
  });

  it("passes acquire options through: waitMs 0 on a held lock rejects without running fn", async () => {
    const { coordinator } = setup();
    await coordinator.acquire("jobs", { waitMs: 0 });
    let ran = false;
    await expect(
      coordinator.withLock(
        "jobs",
        () => {
          ran = true;
        },
        { waitMs: 0 },
      ),
    ).rejects.toBeInstanceOf(LockHeldError);
    expect(ran).toBe(false);
  });

  it("publishes the value while fn runs", async () => {
    const { coordinator } = setup();
    const seen = await coordinator.withLock(
      "jobs",
      async () => (await coordinator.holder("jobs"))?.value,
      { value: "node-a" },
    );
    expect(seen).toBe("node-a");
  });
});
