import { describe, expect, it } from "vitest";
import { type Clock, ManualClock, MemoryStore, SessionLostError } from "../../src/index.js";
import { flush, track } from "../support/helpers.js";

const never = new AbortController().signal;

/** A clock whose timers run late, as Node's do under load: time moves, callbacks wait. */
class LateTimerClock implements Clock {
  time = 0;
  readonly #due: Array<{ at: number; run: () => void; cancelled: boolean }> = [];
  now(): number {
    return this.time;
  }
  setTimer(callback: () => void, delayMs: number) {
    const timer = { at: this.time + delayMs, run: callback, cancelled: false };
    this.#due.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }
  /** Runs the timers that are due, late. */
  runDue(): void {
    for (const t of this.#due.splice(0)) {
      if (t.cancelled) continue;
      if (t.at <= this.time) t.run();
      else this.#due.push(t);
    }
  }
}

describe("MemoryStore", () => {
  it("grants 10 waiters in FIFO order, each with a greater token", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const holder = store.openSession("holder", 10_000);
    const first = await store.acquire(holder, "k", false, undefined, never);
    const order: string[] = [];
    const tokens: bigint[] = [];
    const waiters = Array.from({ length: 10 }, (_, i) => {
      const session = store.openSession(`w${i}`, 10_000);
      return store.acquire(session, "k", true, undefined, never).then((grant) => {
        order.push(`w${i}`);
        tokens.push(grant?.token ?? -1n);
        store.release(session, "k", grant?.token ?? -1n);
      });
    });
    await flush();
    expect(order).toEqual([]);
    expect(store.release(holder, "k", first?.token ?? -1n)).toBe(true);
    await Promise.all(waiters);
    expect(order).toEqual(Array.from({ length: 10 }, (_, i) => `w${i}`));
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i] as bigint).toBeGreaterThan(tokens[i - 1] as bigint);
    }
    expect(tokens[0] as bigint).toBeGreaterThan(first?.token ?? 0n);
  });

  it("try-once returns null while held or while others queue", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const b = store.openSession("b", 10_000);
    await store.acquire(a, "k", false, undefined, never);
    expect(await store.acquire(b, "k", false, undefined, never)).toBeNull();
  });

  it("release is owner-checked: another session or an old token gets false", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const b = store.openSession("b", 10_000);
    const grant = await store.acquire(a, "k", false, undefined, never);
    const token = grant?.token ?? -1n;
    expect(store.release(b, "k", token)).toBe(false);
    expect(store.release(a, "k", token + 1n)).toBe(false);
    expect(store.holder("k")?.ownerId).toBe("a");
    expect(store.release(a, "k", token)).toBe(true);
    expect(store.release(a, "k", token)).toBe(false);
  });

  it("a lease that is not renewed expires on the clock and hands the lock to the next waiter", async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ clock });
    const a = store.openSession("a", 1_000);
    const b = store.openSession("b", 5_000);
    await store.acquire(a, "k", false, undefined, never);
    const waiting = track(store.acquire(b, "k", true, undefined, never));
    await clock.advance(999);
    expect(waiting.status).toBe("pending");
    await clock.advance(1);
    expect(waiting.status).toBe("fulfilled");
    expect(store.holder("k")?.ownerId).toBe("b");
    expect(() => store.keepAlive(a)).toThrow(SessionLostError);
  });

  it("an expired lease whose timer has not run yet is not granted to two sessions", async () => {
    const clock = new LateTimerClock();
    const store = new MemoryStore({ clock });
    const a = store.openSession("a", 1_000);
    const b = store.openSession("b", 10_000);
    const c = store.openSession("c", 10_000);
    await store.acquire(a, "k", false, undefined, never);
    clock.time = 1_500; // a's lease ran out; its expiry timer is late
    const toB = await store.acquire(b, "k", false, undefined, never);
    expect(toB).not.toBeNull();
    // b holds it now: c must be refused, and holder() must say b.
    expect(await store.acquire(c, "k", false, undefined, never)).toBeNull();
    expect(store.holder("k")?.ownerId).toBe("b");
    clock.runDue();
    expect(store.holder("k")?.ownerId).toBe("b");
  });

  it("keepAlive extends the lease", async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ clock });
    const a = store.openSession("a", 1_000);
    await store.acquire(a, "k", false, undefined, never);
    for (let i = 0; i < 10; i++) {
      await clock.advance(500);
      store.keepAlive(a);
    }
    expect(store.holder("k")?.ownerId).toBe("a");
  });

  it("an aborted waiter is removed and does not block the queue", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const b = store.openSession("b", 10_000);
    const c = store.openSession("c", 10_000);
    const grant = await store.acquire(a, "k", false, undefined, never);
    const controller = new AbortController();
    const cancelled = track(store.acquire(b, "k", true, undefined, controller.signal));
    const reason = new Error("cancel");
    controller.abort(reason);
    await flush();
    expect(cancelled.error).toBe(reason);
    store.release(a, "k", grant?.token ?? -1n);
    expect(await store.acquire(c, "k", false, undefined, never)).not.toBeNull();
  });

  it("closing a session frees its locks and drops its waiters with SessionLostError", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const b = store.openSession("b", 10_000);
    await store.acquire(a, "k", false, undefined, never);
    await store.acquire(b, "other", false, undefined, never);
    const waiting = track(store.acquire(b, "k", true, undefined, never));
    store.closeSession(b);
    await flush();
    expect(waiting.error).toBeInstanceOf(SessionLostError);
    expect(store.holder("other")).toBeNull();
    store.closeSession(a);
    expect(store.holder("k")).toBeNull();
  });

  it("watch() yields the holder now, then after each change, until aborted", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const b = store.openSession("b", 10_000);
    const controller = new AbortController();
    const it = store.watch("k", controller.signal)[Symbol.asyncIterator]();

    expect((await it.next()).value).toBeNull();

    const grantA = await store.acquire(a, "k", false, "node-a", never);
    expect((await it.next()).value).toEqual({
      ownerId: "a",
      token: grantA?.token,
      value: "node-a",
      remainingMs: 10_000,
    });

    store.release(a, "k", grantA?.token ?? -1n);
    expect((await it.next()).value).toBeNull();

    const grantB = await store.acquire(b, "k", false, undefined, never);
    expect((await it.next()).value).toEqual({
      ownerId: "b",
      token: grantB?.token,
      remainingMs: 10_000,
    });

    const pending = it.next();
    controller.abort();
    expect((await pending).done).toBe(true);
  });

  it("watch() starts with the current holder when the lock is already held", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const grant = await store.acquire(a, "k", false, undefined, never);
    const controller = new AbortController();
    const seen: Array<string | null> = [];
    for await (const holder of store.watch("k", controller.signal)) {
      seen.push(holder?.ownerId ?? null);
      if (seen.length === 1) store.release(a, "k", grant?.token ?? -1n);
      else controller.abort();
    }
    expect(seen).toEqual(["a", null]);
  });

  it("tokens rise across keys (one counter)", async () => {
    const store = new MemoryStore({ clock: new ManualClock() });
    const a = store.openSession("a", 10_000);
    const x = await store.acquire(a, "x", false, undefined, never);
    const y = await store.acquire(a, "y", false, undefined, never);
    expect(y?.token ?? 0n).toBeGreaterThan(x?.token ?? 0n);
  });
});
