import { describe, expect, it } from "vitest";
import { AbortScope } from "../../src/helpers/abort-scope.js";
import { KeyedMutex } from "../../src/helpers/keyed-mutex.js";
import { createCoordinator, LockLostError, MemoryBackend } from "../../src/index.js";

describe("AbortScope", () => {
  it("a signal built after the scope ended is already aborted with the same reason", () => {
    const scope = new AbortScope();
    const reason = new Error("gone");
    scope.abort(reason);
    expect(scope.aborted).toBe(true);
    expect(scope.signal.aborted).toBe(true);
    expect(scope.signal.reason).toBe(reason);
  });

  it("a signal built before the end aborts with the reason and runs its listeners once", () => {
    const scope = new AbortScope();
    const seen: unknown[] = [];
    scope.signal.addEventListener("abort", () => seen.push(scope.signal.reason));
    scope.abort("first");
    scope.abort("second");
    expect(seen).toEqual(["first"]);
    expect(scope.reason).toBe("first");
  });

  it("callbacks run on abort, not after removal, and not for an ended scope", () => {
    const scope = new AbortScope();
    const calls: string[] = [];
    const b = () => calls.push("b");
    scope.addCallback((r) => calls.push(`a:${String(r)}`));
    scope.addCallback(b);
    scope.addCallback((r) => calls.push(`c:${String(r)}`));
    scope.removeCallback(b);
    scope.abort("x");
    scope.addCallback(() => calls.push("late"));
    expect(calls).toEqual(["a:x", "c:x"]);
  });

  it("follows an outside signal until disposed, and leaves no listener on it", () => {
    const outer = new AbortController();
    const followed = new AbortScope().follow(outer.signal);
    const disposed = new AbortScope().follow(outer.signal);
    disposed.dispose();
    outer.abort("stop");
    expect(followed.aborted).toBe(true);
    expect(followed.reason).toBe("stop");
    expect(disposed.aborted).toBe(false);
    expect(new AbortScope().follow(outer.signal).reason).toBe("stop");
  });

  it("follows another scope's signal: ends with that scope until disposed", () => {
    const inner = new AbortScope();
    const followed = new AbortScope().follow(inner.signal);
    const disposed = new AbortScope().follow(inner.signal);
    disposed.dispose();
    const heard: unknown[] = [];
    inner.signal.addEventListener("abort", () => heard.push(inner.signal.reason));
    inner.abort("done");
    expect(heard).toEqual(["done"]);
    expect(followed.aborted).toBe(true);
    expect(followed.reason).toBe("done");
    expect(followed.signal.reason).toBe("done");
    expect(disposed.aborted).toBe(false);
    expect(new AbortScope().follow(inner.signal).reason).toBe("done");
  });

  it("a KeyedMutex waiter leaves the queue when its scope aborts", async () => {
    const mutex = new KeyedMutex();
    const turn = await mutex.lock("k");
    const scope = new AbortScope();
    const waiting = mutex.lock("k", scope);
    scope.abort(new Error("cancelled"));
    await expect(waiting).rejects.toThrow("cancelled");
    turn.end();
    expect(mutex.isLocked("k")).toBe(false);
  });
});

describe("Lock signal (built on demand)", () => {
  it("read after release, it is aborted with a LockLostError whose reason is 'released'", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend(), ttlMs: 1_000 });
    try {
      const lock = await coordinator.acquire("on-demand");
      expect(await lock.release()).toBe(true);
      expect(lock.held).toBe(false);
      expect(lock.signal.aborted).toBe(true);
      expect(lock.signal.reason).toBeInstanceOf(LockLostError);
      expect(lock.lostReason).toBe("released");
      expect(() => lock.throwIfLost()).toThrow(/released/);
    } finally {
      await coordinator.close();
    }
  });

  it("read while held, it aborts on release and its listeners run", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend(), ttlMs: 1_000 });
    try {
      const lock = await coordinator.acquire("on-demand-live");
      const reasons: unknown[] = [];
      lock.signal.addEventListener("abort", () => reasons.push(lock.signal.reason));
      expect(lock.signal.aborted).toBe(false);
      await lock.release();
      expect(reasons).toHaveLength(1);
      expect((reasons[0] as LockLostError).reason).toBe("released");
    } finally {
      await coordinator.close();
    }
  });

  it("withLock's context signal is the lock's signal", async () => {
    const coordinator = createCoordinator({ backend: new MemoryBackend(), ttlMs: 1_000 });
    try {
      const after = await coordinator.withLock("ctx", ({ signal, lock }) => {
        expect(signal).toBe(lock.signal);
        expect(signal.aborted).toBe(false);
        return signal;
      });
      expect(after.aborted).toBe(true);
    } finally {
      await coordinator.close();
    }
  });
});

describe("linkSignals (a scope following several signals)", () => {
  it("aborts with the first source's reason and unhooks every source", async () => {
    const { linkSignals } = await import("../../src/helpers/link-signals.js");
    const a = new AbortController();
    const b = new AbortController();
    const link = linkSignals([a.signal, undefined, b.signal]);
    b.abort("b went first");
    a.abort("a later");
    expect(link.signal.aborted).toBe(true);
    expect(link.signal.reason).toBe("b went first");
    const c = new AbortController();
    const disposed = linkSignals([c.signal]);
    disposed.dispose();
    c.abort("after dispose");
    expect(disposed.signal.aborted).toBe(false);
    const early = linkSignals([AbortSignal.abort("already")]);
    expect(early.signal.reason).toBe("already");
  });
});
