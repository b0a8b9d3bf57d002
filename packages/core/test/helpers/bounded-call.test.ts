import { describe, expect, it } from "vitest";
import { BackendUnavailableError, backoffMs, boundedCall } from "../../src/index.js";

/** Blocks the event loop for `ms`, as a long GC, a busy loop or SIGSTOP would. */
function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}

describe("boundedCall", () => {
  it("says the process was paused when its bound ran out while the event loop was blocked", async () => {
    const racing = boundedCall(never(), { timeoutMs: 200, what: "the fence" }).catch(
      (e: unknown) => e,
    );
    blockEventLoop(900);
    const error = await racing;
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).message).toMatch(
      /^the fence: no answer within 200 ms; this process was paused for (\d+) ms meanwhile \(event loop blocked or process stopped\), so the store may not be at fault$/,
    );
    const paused = Number(/paused for (\d+) ms/.exec((error as Error).message)?.[1]);
    expect(paused).toBeGreaterThanOrEqual(600);
  });

  it("blames no pause when the bound ran out on time", async () => {
    const error = await boundedCall(never(), { timeoutMs: 50, what: "x" }).catch((e: unknown) => e);
    expect((error as Error).message).toBe("x: no answer within 50 ms");
  });

  it("resolves with the call's value when it answers in time", async () => {
    await expect(boundedCall(Promise.resolve(7), { timeoutMs: 1_000 })).resolves.toBe(7);
  });

  it("gives up after timeoutMs with an error naming the call and the lock", async () => {
    const error = await boundedCall(never(), {
      timeoutMs: 20,
      what: "redis acquire",
      name: "invoices",
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).message).toBe('redis acquire of "invoices": no answer within 20 ms');
  });

  it("rejects with the signal's reason when it aborts first, and hands over the late call", async () => {
    const controller = new AbortController();
    let late: Promise<number> | undefined;
    let answer: (value: number) => void = () => undefined;
    const call = new Promise<number>((resolve) => {
      answer = resolve;
    });
    const racing = boundedCall(call, {
      timeoutMs: 60_000,
      signal: controller.signal,
      onAbandoned: (pending) => {
        late = pending;
      },
    });
    const reason = new Error("shutting down");
    controller.abort(reason);
    await expect(racing).rejects.toBe(reason);
    answer(3);
    await expect(late).resolves.toBe(3);
  });

  it("rejects at once for a signal that has already aborted", async () => {
    const reason = new Error("too late");
    let abandoned = false;
    await expect(
      boundedCall(never(), {
        signal: AbortSignal.abort(reason),
        onAbandoned: () => {
          abandoned = true;
        },
      }),
    ).rejects.toBe(reason);
    expect(abandoned).toBe(true);
  });

  it("maps the call's own failure with mapError, and only that", async () => {
    const failure = new Error("ECONNRESET");
    const mapped = await boundedCall(Promise.reject(failure), {
      timeoutMs: 1_000,
      mapError: (e) => new BackendUnavailableError(`mapped: ${(e as Error).message}`),
    }).catch((e: unknown) => e);
    expect((mapped as Error).message).toBe("mapped: ECONNRESET");
  });

  it("adds one abort listener to a signal however many calls share it", async () => {
    const controller = new AbortController();
    let added = 0;
    const add = controller.signal.addEventListener.bind(controller.signal);
    controller.signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      add(...args);
    }) as typeof add;
    const calls = Array.from({ length: 50 }, () =>
      boundedCall(never(), { signal: controller.signal }).catch((e: unknown) => e),
    );
    controller.abort(new Error("stop"));
    const errors = await Promise.all(calls);
    expect(added).toBe(1);
    expect(errors.every((e) => (e as Error).message === "stop")).toBe(true);
  });
});

describe("backoffMs", () => {
  it("waits between half and all of a ceiling that doubles up to maxMs", () => {
    const options = { minMs: 20, maxMs: 1_000 };
    for (let i = 0; i < 200; i++) {
      const first = backoffMs(0, options);
      expect(first).toBeGreaterThanOrEqual(10);
      expect(first).toBeLessThanOrEqual(20);
      const third = backoffMs(2, options);
      expect(third).toBeGreaterThanOrEqual(40);
      expect(third).toBeLessThanOrEqual(80);
      const late = backoffMs(30, options);
      expect(late).toBeGreaterThanOrEqual(500);
      expect(late).toBeLessThanOrEqual(1_000);
    }
  });
});
