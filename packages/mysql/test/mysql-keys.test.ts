import { describe, expect, it } from "vitest";
import { GET_LOCK_NAME_MAX, getLockName } from "../src/index.js";

describe("GET_LOCK names", () => {
  it("a short lower-case name reads as itself after the namespace", () => {
    expect(getLockName("baton", "invoices/2024-05:run.1")).toBe("baton:invoices/2024-05:run.1");
  });

  it("other names are hashed: at most 64 ASCII characters, the same every time", () => {
    for (const name of ["Invoices", "a b", "é", "😀", "x".repeat(256), "Z".repeat(256)]) {
      const lockName = getLockName("a-namespace-of-20-ch", name);
      expect(lockName.length).toBeLessThanOrEqual(GET_LOCK_NAME_MAX);
      expect(lockName).toMatch(/^[\x21-\x7e]+$/);
      expect(lockName).toMatch(/^a-namespace-of-20-ch#[0-9a-f]{40}$/);
      expect(getLockName("a-namespace-of-20-ch", name)).toBe(lockName);
    }
  });

  it("names that a server ignoring case, or cutting at 64, would merge stay apart", () => {
    const names = [
      "invoices",
      "Invoices",
      "INVOICES",
      `${"a".repeat(59)}`,
      `${"a".repeat(59)}b`,
      `${"a".repeat(64)}`,
      `${"a".repeat(64)}b`,
      "baton#x",
      "x:y",
    ];
    const lockNames = names.map((name) => getLockName("baton", name).toLowerCase());
    expect(new Set(lockNames).size).toBe(names.length);
  });

  it("one name in two namespaces is two locks", () => {
    expect(getLockName("a", "jobs")).not.toBe(getLockName("b", "jobs"));
    expect(getLockName("a", "Jobs")).not.toBe(getLockName("b", "Jobs"));
  });
});
