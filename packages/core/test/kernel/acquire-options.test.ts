import { describe, expect, it } from "vitest";
import { ConfigError, type Coordinator } from "../../src/index.js";
import { rejectionOf, setup } from "../support/helpers.js";

type Call = (c: Coordinator, options: unknown) => Promise<unknown>;

const acquire: Call = (c, o) => c.acquire("jobs", o as never);
const tryAcquire: Call = (c, o) => c.tryAcquire("jobs", o as never);
const withLock: Call = (c, o) => c.withLock("jobs", () => "ran", o as never);

async function expectConfigError(
  call: Call,
  options: unknown,
  field: string,
  message: RegExp,
): Promise<void> {
  const { backend, coordinator } = setup();
  const error = await rejectionOf(call(coordinator, options));
  expect(error).toBeInstanceOf(ConfigError);
  expect(error).toMatchObject({ field });
  expect((error as Error).message).toMatch(message);
  // Thrown before any I/O.
  expect(backend.calls.openSession).toBe(0);
  expect(backend.calls.acquire).toBe(0);
}

describe("acquire options are checked before any I/O", () => {
  const waitRange = /integer between 0 and 86400000/;
  for (const [label, waitMs] of [
    ["-1", -1],
    ["1.5", 1.5],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["NaN", Number.NaN],
    ['"100"', "100"],
    ["more than a day", 86_400_001],
  ] as const) {
    it(`waitMs ${label} is a ConfigError naming the range`, async () => {
      await expectConfigError(acquire, { waitMs }, "waitMs", waitRange);
      await expectConfigError(withLock, { waitMs }, "waitMs", waitRange);
    });
  }

  it("value that is not a string is a ConfigError(value)", async () => {
    for (const call of [acquire, tryAcquire, withLock]) {
      await expectConfigError(call, { value: 42 }, "value", /must be a string/);
    }
  });

  it("value longer than 4096 characters is a ConfigError(value) naming the limit", async () => {
    for (const call of [acquire, tryAcquire, withLock]) {
      await expectConfigError(call, { value: "v".repeat(4097) }, "value", /at most 4096/);
    }
  });

  it("a 4096-character value is accepted and published", async () => {
    const { coordinator } = setup();
    const lock = await coordinator.acquire("jobs", { value: "v".repeat(4096), waitMs: 0 });
    expect(lock.value).toHaveLength(4096);
    expect((await coordinator.holder("jobs"))?.value).toHaveLength(4096);
  });

  it("signal that is not an AbortSignal is a ConfigError(signal)", async () => {
    for (const signal of [{}, "abort", { aborted: false }]) {
      for (const call of [acquire, tryAcquire, withLock]) {
        await expectConfigError(call, { signal }, "signal", /must be an AbortSignal/);
      }
    }
  });

  it("an unknown option is a ConfigError naming it as options.<key>", async () => {
    for (const call of [acquire, tryAcquire, withLock]) {
      await expectConfigError(call, { foo: 1 }, "options.foo", /unknown option; allowed:/);
    }
    await expectConfigError(acquire, { ttl: 5 }, "options.ttl", /waitMs, signal, value/);
  });

  it("tryAcquire has no waitMs: passing one is a ConfigError(options.waitMs)", async () => {
    await expectConfigError(tryAcquire, { waitMs: 10 }, "options.waitMs", /allowed: signal, value/);
  });

  it("options that are not an object are a ConfigError(options)", async () => {
    for (const options of [null, 5, "fast", [1]]) {
      await expectConfigError(acquire, options, "options", /must be an object/);
    }
  });

  it("waitMs 0 and one day are accepted", async () => {
    const { coordinator } = setup();
    const a = await coordinator.acquire("a", { waitMs: 0 });
    const b = await coordinator.acquire("b", { waitMs: 86_400_000 });
    expect([a.held, b.held]).toEqual([true, true]);
  });
});
