import { afterEach, describe, expect, it } from "vitest";
import {
  type Coordinator,
  createCoordinator,
  LockLostError,
  linkSignals,
  ManualClock,
  MemoryBackend,
} from "../../src/index.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

describe("a signal linked to a lock's", () => {
  it("checks the lock's deadline on read: after a pause past the lease its first read says aborted", async () => {
    const clock = new ManualClock();
    const coordinator = createCoordinator({
      backend: new MemoryBackend({ clock }),
      ttlMs: 1_000,
      clock,
    });
    open.push(coordinator);
    const lock = await coordinator.acquire("invoices");
    const caller = new AbortController();
    const linked = linkSignals([caller.signal, lock.signal]);
    expect(linked.signal.aborted).toBe(false);
    clock.jump(5_000); // a pause (SIGSTOP, a long GC) past the lease, before any timer has run
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBeInstanceOf(LockLostError);
    expect(() => linked.signal.throwIfAborted()).toThrow(LockLostError);
    expect(lock.held).toBe(false);
    linked.dispose();
  });

  it("once disposed, no longer follows the lock, even through a check", async () => {
    const clock = new ManualClock();
    const coordinator = createCoordinator({
      backend: new MemoryBackend({ clock }),
      ttlMs: 1_000,
      clock,
    });
    open.push(coordinator);
    const lock = await coordinator.acquire("invoices");
    const linked = linkSignals([lock.signal]);
    linked.dispose();
    clock.jump(5_000);
    expect(linked.signal.aborted).toBe(false);
    expect(lock.signal.aborted).toBe(true);
  });
});
