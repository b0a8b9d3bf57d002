import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  BatonError,
  ConfigError,
  CoordinatorClosedError,
  isAbortError,
  LockHeldError,
  LockLostError,
  LockTimeoutError,
  RunTimeoutError,
  SessionLostError,
  StaleTokenError,
} from "../../src/index.js";

const CASES: ReadonlyArray<{ error: BatonError; name: string; code: string }> = [
  {
    error: new LockTimeoutError("jobs", 500),
    name: "LockTimeoutError",
    code: "BATON_LOCK_TIMEOUT",
  },
  { error: new LockHeldError("jobs"), name: "LockHeldError", code: "BATON_LOCK_HELD" },
  {
    error: new LockLostError("jobs", 7n, "deadline"),
    name: "LockLostError",
    code: "BATON_LOCK_LOST",
  },
  { error: new SessionLostError(), name: "SessionLostError", code: "BATON_SESSION_LOST" },
  {
    error: new StaleTokenError("invoices", 3n, 9n),
    name: "StaleTokenError",
    code: "BATON_STALE_TOKEN",
  },
  {
    error: new BackendUnavailableError("down"),
    name: "BackendUnavailableError",
    code: "BATON_BACKEND_UNAVAILABLE",
  },
  { error: new ConfigError("ttlMs", "bad"), name: "ConfigError", code: "BATON_CONFIG" },
  {
    error: new CoordinatorClosedError(),
    name: "CoordinatorClosedError",
    code: "BATON_CLOSED",
  },
  {
    error: new RunTimeoutError("invoices", "2026-12-01", 1_000),
    name: "RunTimeoutError",
    code: "BATON_RUN_TIMEOUT",
  },
];

describe("named errors", () => {
  for (const { error, name, code } of CASES) {
    it(`${name} has code ${code}, its name, and is a BatonError and an Error`, () => {
      expect(error.code).toBe(code);
      expect(error.name).toBe(name);
      expect(error).toBeInstanceOf(BatonError);
      expect(error).toBeInstanceOf(Error);
      expect(String(error)).toMatch(new RegExp(`^${name}: `));
      expect(error.stack).toContain(name);
    });
  }

  it("codes are unique per class", () => {
    expect(new Set(CASES.map((c) => c.code)).size).toBe(CASES.length);
  });

  it("classes do not match each other's instanceof", () => {
    for (const a of CASES) {
      for (const b of CASES) {
        if (a === b) continue;
        expect(a.error instanceof (b.error.constructor as typeof BatonError)).toBe(false);
      }
    }
  });

  it("carry the details a handler needs", () => {
    expect(new LockTimeoutError("jobs", 500)).toMatchObject({ lockName: "jobs", waitMs: 500 });
    expect(new LockHeldError("jobs")).toMatchObject({ lockName: "jobs" });
    expect(new LockLostError("jobs", 7n, "key-lost")).toMatchObject({
      lockName: "jobs",
      token: 7n,
      reason: "key-lost",
    });
    expect(new StaleTokenError("invoices", 3n, 9n)).toMatchObject({
      resource: "invoices",
      token: 3n,
      highest: 9n,
    });
    expect(new ConfigError("ttlMs", "bad")).toMatchObject({ field: "ttlMs" });
  });

  it("messages name the lock and the reason", () => {
    expect(new LockTimeoutError("jobs", 500).message).toMatch(/"jobs".*waitMs=500/);
    expect(new StaleTokenError("invoices", 3n, 9n).message).toMatch(/token 3.*token 9/);
    for (const reason of [
      "released",
      "deadline",
      "session-lost",
      "key-lost",
      "fence-rejected",
      "closed",
    ] as const) {
      const message = new LockLostError("jobs", 7n, reason).message;
      expect(message).toMatch(/lock "jobs" \(token 7\)/);
      expect(message.length).toBeGreaterThan('lock "jobs" (token 7)'.length);
    }
  });

  it("keep a cause", () => {
    const cause = new Error("ECONNREFUSED");
    expect(new BackendUnavailableError("down", { cause }).cause).toBe(cause);
    expect(new LockLostError("jobs", 1n, "session-lost", { cause }).cause).toBe(cause);
  });

  it("isAbortError recognises DOM AbortErrors only", () => {
    const controller = new AbortController();
    controller.abort();
    expect(isAbortError(controller.signal.reason)).toBe(true);
    expect(isAbortError(new Error("x"))).toBe(false);
    expect(isAbortError(new LockLostError("jobs", 1n, "released"))).toBe(false);
  });
});
