import { describe, expect, it } from "vitest";
import { formatHolder } from "../src/commands/status.js";

describe("baton status lines", () => {
  it("names a Baton holder by its owner id", () => {
    expect(formatHolder("invoices", { ownerId: "billing-7f3a", token: 12n }, false)).toBe(
      "invoices: held by billing-7f3a, token 12, time left unknown",
    );
  });

  it("names another library's holder and the data it stored, empty or not", () => {
    expect(
      formatHolder(
        "interop-a",
        { ownerId: "127.0.0.1", token: 4294967302n, foreign: "curator" },
        false,
      ),
    ).toBe('interop-a: held by a curator client "127.0.0.1", token 4294967302, time left unknown');
    expect(formatHolder("interop-a", { ownerId: "", token: 7n, foreign: "kazoo" }, false)).toBe(
      "interop-a: held by a kazoo client (no identifier), token 7, time left unknown",
    );
  });

  it("gives the library in --json, null for Baton's own holders and a free lock", () => {
    const foreign = formatHolder(
      "interop-a",
      { ownerId: "worker-7", token: 7n, foreign: "kazoo" },
      true,
    );
    expect(JSON.parse(foreign)).toEqual({
      name: "interop-a",
      held: true,
      owner: "worker-7",
      token: "7",
      value: null,
      remainingMs: null,
      foreign: "kazoo",
    });
    expect(JSON.parse(formatHolder("a", { ownerId: "o", token: 1n }, true)).foreign).toBeNull();
    expect(JSON.parse(formatHolder("a", null, true)).foreign).toBeNull();
  });
});
