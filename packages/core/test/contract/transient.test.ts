import { describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  ConfigError,
  isTransient,
  LockTimeoutError,
  SessionLostError,
  StaleTokenError,
} from "../../src/index.js";

const systemError = (code: string) => Object.assign(new Error(`connect ${code}`), { code });

describe("isTransient: only errors known to pass are retried", () => {
  it("BackendUnavailableError is transient", () => {
    expect(isTransient(new BackendUnavailableError("no quorum"))).toBe(true);
  });

  it("Node.js network errors (refused, reset, timed out, unreachable, DNS retry) are transient", () => {
    for (const code of [
      "ECONNREFUSED",
      "ECONNRESET",
      "ECONNABORTED",
      "EPIPE",
      "ETIMEDOUT",
      "EHOSTUNREACH",
      "ENETUNREACH",
      "EAI_AGAIN",
    ]) {
      expect(isTransient(systemError(code)), code).toBe(true);
    }
  });

  it("programming errors and unmapped driver errors are not: a URIError is never retried", () => {
    expect(isTransient(new URIError("URI malformed"))).toBe(false);
    expect(isTransient(new TypeError("x is not a function"))).toBe(false);
    expect(isTransient(new Error("ECONNRESET"))).toBe(false); // a message is not a code
    expect(isTransient(Object.assign(new Error("syntax"), { code: "42601" }))).toBe(false);
    expect(isTransient(systemError("ENOTFOUND"))).toBe(false); // a typo in a host name
    expect(isTransient(systemError("EACCES"))).toBe(false);
  });

  it("other Baton errors and non-errors are not transient", () => {
    expect(isTransient(new ConfigError("url", "bad"))).toBe(false);
    expect(isTransient(new SessionLostError())).toBe(false);
    expect(isTransient(new LockTimeoutError("jobs", 5))).toBe(false);
    expect(isTransient(new StaleTokenError("jobs", 1n, 2n))).toBe(false);
    expect(isTransient("ECONNRESET")).toBe(false);
    expect(isTransient({ code: "ECONNRESET" })).toBe(false);
    expect(isTransient(undefined)).toBe(false);
  });
});
