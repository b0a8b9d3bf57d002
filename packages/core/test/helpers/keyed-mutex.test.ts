import { describe, expect, it } from "vitest";
import { KeyedMutex, KeyTurn, NO_TURN } from "../../src/helpers/keyed-mutex.js";
import { flush, track } from "../support/helpers.js";

describe("KeyedMutex", () => {
  it("grants 10 waiters in FIFO order", async () => {
    const mutex = new KeyedMutex();
    const first = await mutex.lock("k");
    const order: number[] = [];
    const waiters = Array.from({ length: 10 }, (_, i) =>
      mutex.lock("k").then((turn) => {
        order.push(i);
        turn.end();
      }),
    );
    await flush();
    expect(order).toEqual([]);
    first.end();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(mutex.isLocked("k")).toBe(false);
  });

  it("holds one key at a time per holder; other keys are independent", async () => {
    const mutex = new KeyedMutex();
    await mutex.lock("a");
    const b = track(mutex.lock("b"));
    const a2 = track(mutex.lock("a"));
    await flush();
    expect(b.status).toBe("fulfilled");
    expect(a2.status).toBe("pending");
    expect(mutex.isLocked("a")).toBe(true);
  });

  it("ending a turn twice does not let two waiters in", async () => {
    const mutex = new KeyedMutex();
    const turn = await mutex.lock("k");
    const second = track(mutex.lock("k"));
    const third = track(mutex.lock("k"));
    turn.end();
    turn.end();
    await flush();
    expect(second.status).toBe("fulfilled");
    expect(third.status).toBe("pending");
  });

  it("an aborted waiter rejects with the reason and leaves the queue as if it never asked", async () => {
    const mutex = new KeyedMutex();
    const turn = await mutex.lock("k");
    const controller = new AbortController();
    const cancelled = track(mutex.lock("k", controller.signal));
    const next = track(mutex.lock("k"));
    const reason = new Error("cancel");
    controller.abort(reason);
    await flush();
    expect(cancelled.status).toBe("rejected");
    expect(cancelled.error).toBe(reason);
    turn.end();
    await flush();
    expect(next.status).toBe("fulfilled");
  });

  it("an already aborted signal rejects without queueing", async () => {
    const mutex = new KeyedMutex();
    const reason = new Error("late");
    await expect(mutex.lock("k", AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(mutex.isLocked("k")).toBe(false);
  });
});

describe("KeyedMutex.tryLock", () => {
  it("takes a free key at once, refuses a taken one, and queued waiters still go first", async () => {
    const mutex = new KeyedMutex();
    const turn = mutex.tryLock("k");
    expect(turn).toBeInstanceOf(KeyTurn);
    expect(mutex.tryLock("k")).toBeUndefined();
    const waiter = mutex.lock("k");
    turn?.end();
    // The key went to the waiter, so a try still fails.
    expect(mutex.tryLock("k")).toBeUndefined();
    (await waiter).end();
    expect(mutex.isLocked("k")).toBe(false);
    expect(mutex.tryLock("k")).toBeInstanceOf(KeyTurn);
  });
});

describe("KeyTurn", () => {
  it("tells its listener once as it ends, before the key is free", async () => {
    const mutex = new KeyedMutex();
    const seen: string[] = [];
    const turn = (await mutex.lock("k")).follow(
      {
        turnEnded: (key, ms) =>
          seen.push(`${key} ${ms} ${mutex.isLocked(key) ? "locked" : "free"}`),
      },
      250,
    );
    turn.end();
    turn.end();
    expect(seen).toEqual(["k 250 locked"]);
    expect(mutex.isLocked("k")).toBe(false);
  });

  it("NO_TURN frees nothing and keeps no listener", () => {
    const mutex = new KeyedMutex();
    const held = mutex.tryLock("k");
    const seen: string[] = [];
    NO_TURN.follow({ turnEnded: (key) => seen.push(key) }, 1).end();
    expect(seen).toEqual([]);
    expect(mutex.isLocked("k")).toBe(true);
    held?.end();
  });
});
