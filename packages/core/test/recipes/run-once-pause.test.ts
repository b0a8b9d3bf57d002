import { afterEach, describe, expect, it } from "vitest";
import {
  type Coordinator,
  createCoordinator,
  LockLostError,
  ManualClock,
  MemoryBackend,
  type RunContext,
  RunTimeoutError,
} from "../../src/index.js";
import { wrappedMemory } from "../support/wrapped-memory.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

/** Replicas on one memory store and one manual clock: `clock.jump` is a process pause. */
function pausable(ttlMs = 1_000) {
  const clock = new ManualClock();
  const backend = new MemoryBackend({ clock });
  const make = (ownerId: string) => {
    const c = createCoordinator({ backend, ttlMs, ownerId, clock });
    open.push(c);
    return c;
  };
  return { clock, make };
}

describe("a runOnce job's signal after a pause", () => {
  it("past the lease: the first read on waking says aborted (LockLostError), and the attempt is not recorded ran", async () => {
    const { clock, make } = pausable();
    const a = make("replica-a");
    const seen: unknown[] = [];
    const result = await a.runOnce("invoices", "2026-12-01", (run: RunContext) => {
      clock.jump(5_000); // SIGSTOP inside fn, before any timer has run on waking
      seen.push(run.signal.aborted, run.signal.reason);
      expect(() => run.signal.throwIfAborted()).toThrow(LockLostError);
      return "late";
    });
    expect(seen[0]).toBe(true);
    expect(seen[1]).toBeInstanceOf(LockLostError);
    expect(result).toMatchObject({ outcome: "failed", attempt: 1 });
    expect(result.outcome === "failed" && result.error).toBeInstanceOf(LockLostError);
    // The slot is open to a retry, which runs it once.
    const b = make("replica-b");
    const retry = await b.runOnce("invoices", "2026-12-01", ({ attempt }) => attempt);
    expect(retry).toMatchObject({ outcome: "ran", value: 2 });
  });

  it("past atMostMs within the lease: the first read says aborted (RunTimeoutError), not recorded ran", async () => {
    const { clock, make } = pausable(60_000);
    const a = make("replica-a");
    let aborted: boolean | undefined;
    let reason: unknown;
    const result = await a.runOnce(
      "invoices",
      "2026-12-01",
      (run) => {
        clock.jump(2_000);
        aborted = run.signal.aborted;
        reason = run.signal.reason;
        return "late";
      },
      { atMostMs: 1_000 },
    );
    expect(aborted).toBe(true);
    expect(reason).toBeInstanceOf(RunTimeoutError);
    expect(result).toMatchObject({ outcome: "failed", attempt: 1, attemptsLeft: 2 });
    expect(result.outcome === "failed" && result.error).toBeInstanceOf(RunTimeoutError);
  });

  it("a job that never reads its signal and resolves after the pause is recorded failed, not ran", async () => {
    const { clock, make } = pausable();
    const a = make("replica-a");
    const result = await a.runOnce("invoices", "2026-12-01", async () => {
      await Promise.resolve();
      clock.jump(5_000);
      return "late";
    });
    expect(result).toMatchObject({ outcome: "failed", attempt: 1 });
    expect(result.outcome === "failed" && result.error).toBeInstanceOf(LockLostError);
    const b = make("replica-b");
    expect(await b.runOnce("invoices", "2026-12-01", () => "again")).toMatchObject({
      outcome: "ran",
      attempt: 2,
    });
  });

  it("paused past the lease between recording the start and calling fn: fn does not start", async () => {
    const clock = new ManualClock();
    let pauseAfterWrite = true;
    const backend = wrappedMemory(
      "memory",
      (session) => ({
        readRecord: (key) => session.readRecord?.(key) ?? Promise.resolve(null),
        writeRecord: async (key, value, expected) => {
          const version = (await session.writeRecord?.(key, value, expected)) ?? null;
          if (pauseAfterWrite) {
            pauseAfterWrite = false;
            clock.jump(5_000);
          }
          return version;
        },
      }),
      { clock },
    );
    const a = createCoordinator({ backend, ttlMs: 1_000, clock, ownerId: "replica-a" });
    open.push(a);
    let started = false;
    const result = await a.runOnce("invoices", "2026-12-01", () => {
      started = true;
    });
    expect(started).toBe(false);
    expect(result).toMatchObject({ outcome: "failed", attempt: 1 });
    expect(result.outcome === "failed" && result.error).toBeInstanceOf(LockLostError);
  });
});
