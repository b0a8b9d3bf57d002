import { describe, expect, it } from "vitest";
import { createCoordinator } from "../../src/index.js";
import { configErrorOf } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

/** Calls createCoordinator and returns the ConfigError it threw synchronously. */

describe("createCoordinator checks its options synchronously, before any I/O", () => {
  const ttlRange = /integer between 10 and 86400000/;
  for (const [label, ttlMs] of [
    ["0", 0],
    ["9 (below the 10 ms floor)", 9],
    ["1.5", 1.5],
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ['"100"', "100"],
    ["more than a day", 86_400_001],
    ["negative", -1_000],
  ] as const) {
    it(`ttlMs ${label} is a ConfigError(ttlMs) naming the range`, () => {
      const backend = new ScriptedBackend();
      const error = configErrorOf({ backend, ttlMs });
      expect(error.field).toBe("ttlMs");
      expect(error.message).toMatch(ttlRange);
      expect(backend.calls.openSession).toBe(0);
    });
  }

  it("ttlMs 10 and one day are accepted", () => {
    expect(createCoordinator({ backend: new ScriptedBackend(), ttlMs: 10 }).ttlMs).toBe(10);
    expect(createCoordinator({ backend: new ScriptedBackend(), ttlMs: 86_400_000 }).ttlMs).toBe(
      86_400_000,
    );
  });

  it("renewEveryMs above a third of the TTL is a ConfigError(renewEveryMs) naming the range", () => {
    const error = configErrorOf({
      backend: new ScriptedBackend(),
      ttlMs: 1_000,
      renewEveryMs: 334,
    });
    expect(error.field).toBe("renewEveryMs");
    expect(error.message).toMatch(/between 1 and 333/);
  });

  it("renewEveryMs is checked against the default TTL when ttlMs is not given", () => {
    const error = configErrorOf({ backend: new ScriptedBackend(), renewEveryMs: 5_001 });
    expect(error.field).toBe("renewEveryMs");
    expect(error.message).toMatch(/between 1 and 5000/);
  });

  it("renewEveryMs 0 or fractional is a ConfigError(renewEveryMs)", () => {
    for (const renewEveryMs of [0, 2.5, Number.NaN]) {
      expect(configErrorOf({ backend: new ScriptedBackend(), renewEveryMs }).field).toBe(
        "renewEveryMs",
      );
    }
  });

  it("an unknown option is a ConfigError(options.<key>) listing the allowed ones", () => {
    const error = configErrorOf({ backend: new ScriptedBackend(), foo: 1 });
    expect(error.field).toBe("options.foo");
    expect(error.message).toMatch(/unknown option; allowed: .*ttlMs/);
    // A plausible typo is caught too.
    expect(configErrorOf({ backend: new ScriptedBackend(), ttl: 1_000 }).field).toBe("options.ttl");
  });

  it("no options, or options that are not an object, is a ConfigError", () => {
    expect(configErrorOf(undefined).field).toBe("options");
    expect(configErrorOf(null).field).toBe("options");
    expect(configErrorOf("memory://").field).toBe("options");
  });

  it("mode outside the list is a ConfigError(mode) listing the modes", () => {
    const error = configErrorOf({ backend: new ScriptedBackend(), mode: "fast" });
    expect(error.field).toBe("mode");
    expect(error.message).toMatch(/"efficiency", "correctness"/);
    expect(error.message).toMatch(/got "fast"/);
  });

  it("ownerId is checked like a lock name", () => {
    expect(configErrorOf({ backend: new ScriptedBackend(), ownerId: "" }).field).toBe("ownerId");
    expect(configErrorOf({ backend: new ScriptedBackend(), ownerId: "a\nb" }).field).toBe(
      "ownerId",
    );
    expect(configErrorOf({ backend: new ScriptedBackend(), ownerId: 7 }).field).toBe("ownerId");
  });

  it("a backend that is not a LockBackend is a ConfigError(backend)", () => {
    for (const backend of [{}, "memory://", { kind: "x", guarantees: {}, openSession: 1 }]) {
      const error = configErrorOf({ backend });
      expect(error.field).toBe("backend");
      expect(error.message).toMatch(/LockBackend/);
    }
  });

  it("a fence, clock or logger of the wrong shape is a ConfigError naming it", () => {
    const backend = new ScriptedBackend();
    expect(configErrorOf({ backend, fence: {} }).field).toBe("fence");
    expect(configErrorOf({ backend, clock: { now: () => 0 } }).field).toBe("clock");
    expect(configErrorOf({ backend, logger: "console" }).field).toBe("logger");
  });

  it("a ConfigError's message starts with the field it names", () => {
    const error = configErrorOf({ backend: new ScriptedBackend(), ttlMs: 0 });
    expect(error.message.startsWith("ttlMs: ")).toBe(true);
  });
});
