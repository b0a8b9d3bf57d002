import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/helpers/clock.js";
import { ManualClock } from "../../src/helpers/manual-clock.js";
import { setBound, TimerLists } from "../../src/helpers/timer-lists.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("TimerLists (the production clock's bounds)", () => {
  it("fires each timer once, no earlier than its delay, same-delay timers in the order set", async () => {
    const timers = new TimerLists();
    const fired: { id: number; late: number }[] = [];
    const started = performance.now();
    for (let id = 0; id < 5; id++) {
      const setAt = performance.now();
      timers.set(() => fired.push({ id, late: performance.now() - setAt - 30 }), 30, false);
      await sleep(3);
    }
    await sleep(200);
    expect(fired.map((f) => f.id)).toEqual([0, 1, 2, 3, 4]);
    for (const f of fired) expect(f.late).toBeGreaterThanOrEqual(-0.5);
    expect(performance.now() - started).toBeGreaterThan(30);
  });

  it("a cancelled timer never fires; the others of its delay still do", async () => {
    const timers = new TimerLists();
    const fired: number[] = [];
    const handles = Array.from({ length: 200 }, (_, i) =>
      timers.set(() => fired.push(i), 20, true),
    );
    const cancelled = new Set([0, 1, 57, 100, 101, 199]);
    for (const i of cancelled) handles[i]?.cancel();
    handles[0]?.cancel(); // twice: harmless
    await sleep(150);
    expect(fired).toEqual([...Array(200).keys()].filter((i) => !cancelled.has(i)));
    handles[5]?.cancel(); // after it fired: harmless
  });

  it("timers of different delays fire by their own deadlines", async () => {
    const timers = new TimerLists();
    const fired: string[] = [];
    timers.set(() => fired.push("long"), 80, false);
    timers.set(() => fired.push("short"), 10, false);
    timers.set(() => fired.push("zero"), 0, false);
    timers.set(() => fired.push("negative"), -5, false);
    timers.set(() => fired.push("nan"), Number.NaN, false);
    await sleep(40);
    expect(fired.slice(0, 3).sort()).toEqual(["nan", "negative", "zero"]);
    expect(fired[3]).toBe("short");
    await sleep(100);
    expect(fired[4]).toBe("long");
  });

  it("keeps the process alive only while a keepAlive timer of the group is pending", async () => {
    const timers = new TimerLists();
    const quiet = timers.set(() => undefined, 5_000, false);
    expect(timers.state(5_000)).toMatchObject({ keepsAlive: false, pending: 1 });
    const loud = timers.set(() => undefined, 5_000, true);
    expect(timers.state(5_000)).toMatchObject({ keepsAlive: true, pending: 2 });
    loud.cancel();
    expect(timers.state(5_000)).toMatchObject({ keepsAlive: false, pending: 1 });
    quiet.cancel();
    expect(timers.state(5_000)).toMatchObject({ keepsAlive: false, pending: 0 });
    // Set again while the group's Node.js timer is still armed: no new one, and it keeps alive.
    const again = timers.set(() => undefined, 5_000, true);
    expect(timers.state(5_000)).toMatchObject({ keepsAlive: true, pending: 1 });
    again.cancel();
  });

  it("a group whose timers were all cancelled goes away when its Node.js timer fires", async () => {
    const timers = new TimerLists();
    timers.set(() => undefined, 15, true).cancel();
    expect(timers.state(15)).toMatchObject({ pending: 0 });
    await sleep(80);
    expect(timers.state(15)).toBeUndefined();
  });

  it("a timer set from a firing callback runs on a later turn, not in the same one", async () => {
    const timers = new TimerLists();
    const order: string[] = [];
    timers.set(
      () => {
        order.push("first");
        setImmediate(() => order.push("immediate"));
        timers.set(() => order.push("second"), 0, false);
      },
      0,
      false,
    );
    await sleep(50);
    expect(order).toEqual(["first", "immediate", "second"]);
  });

  it("a timer set from a callback does not delay the next due timer of its group", async () => {
    const timers = new TimerLists();
    const fired: { id: string; at: number }[] = [];
    const t0 = performance.now();
    timers.set(
      () => {
        fired.push({ id: "a", at: performance.now() - t0 });
        timers.set(() => fired.push({ id: "c", at: performance.now() - t0 }), 100, false);
      },
      100,
      false,
    );
    await sleep(40);
    timers.set(() => fired.push({ id: "b", at: performance.now() - t0 }), 100, false);
    await sleep(300);
    expect(fired.map((f) => f.id)).toEqual(["a", "b", "c"]);
    const b = fired[1]?.at ?? 0;
    // b is due about 140 ms in; c (set when a fired, ~100 ms in) about 200 ms in.
    expect(b).toBeGreaterThanOrEqual(139);
    expect(b).toBeLessThan(190);
  });

  it("core's bounds go through them on the production clock, and through any other clock as is", async () => {
    const fired: string[] = [];
    setBound(systemClock, () => fired.push("a"), 10, true);
    setBound(systemClock, () => fired.push("b"), 10, false).cancel();
    await sleep(80);
    expect(fired).toEqual(["a"]);
    const clock = new ManualClock();
    const manual = setBound(clock, () => fired.push("manual"), 1_000, true);
    await clock.advance(999);
    expect(fired).toEqual(["a"]);
    await clock.advance(1);
    expect(fired).toEqual(["a", "manual"]);
    manual.cancel();
  });
});
