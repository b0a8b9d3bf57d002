import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/helpers/clock.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("systemClock (the production clock)", () => {
  it("fires a timer once, no earlier than its delay; a cancelled one never fires", async () => {
    const fired: { id: string; late: number }[] = [];
    const start = performance.now();
    systemClock.setTimer(() => fired.push({ id: "a", late: performance.now() - start }), 20, {
      keepAlive: true,
    });
    systemClock.setTimer(() => fired.push({ id: "b", late: 0 }), 20).cancel();
    await sleep(120);
    expect(fired.map((f) => f.id)).toEqual(["a"]);
    expect(fired[0]?.late ?? 0).toBeGreaterThanOrEqual(19);
  });

  it("background timers do not keep the process alive; timers a caller awaits do", () => {
    const seen: boolean[] = [];
    const original = globalThis.setTimeout;
    globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
      const timeout = original(...args);
      queueMicrotask(() => seen.push(timeout.hasRef()));
      return timeout;
    }) as typeof setTimeout;
    try {
      systemClock.setTimer(() => undefined, 5_000).cancel();
      systemClock.setTimer(() => undefined, 5_000, { keepAlive: true }).cancel();
    } finally {
      globalThis.setTimeout = original;
    }
    return Promise.resolve().then(() => expect(seen).toEqual([false, true]));
  });

  it("cancelling a timer that already fired is harmless", async () => {
    let runs = 0;
    const timer = systemClock.setTimer(() => runs++, 1, { keepAlive: true });
    await sleep(30);
    timer.cancel();
    expect(runs).toBe(1);
  });
});
