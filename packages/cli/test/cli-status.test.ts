import { createCoordinator } from "@baton/core";
import { describe, expect, it } from "vitest";
import { formatHolder } from "../src/commands/status.js";
import { runMain } from "./support/run-main.js";

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

  it("prints the time left when the store tells it, and unknown when it does not", () => {
    const held = { ownerId: "billing-7f3a", token: 12n };
    expect(formatHolder("invoices", { ...held, remainingMs: 4_321.4 }, false)).toBe(
      "invoices: held by billing-7f3a, token 12, time left 4321 ms",
    );
    // An adapter may report an unknown time left as null.
    const unknown = { ...held, remainingMs: null as unknown as number };
    expect(formatHolder("invoices", unknown, false)).toBe(
      "invoices: held by billing-7f3a, token 12, time left unknown",
    );
    expect(JSON.parse(formatHolder("invoices", unknown, true)).remainingMs).toBeNull();
  });
});

describe("baton status on the memory backend", () => {
  it("shows the holder's time left, in text and in --json", async () => {
    const url = "memory://status-time-left";
    const coordinator = createCoordinator({ url, ttlMs: 30_000, ownerId: "status-owner" });
    try {
      await coordinator.acquire("report");
      const text = await runMain(["status", "report", "--backend", url]);
      expect(text.code).toBe(0);
      const left = /time left (\d+) ms$/.exec(text.out);
      expect(left, text.out).not.toBeNull();
      expect(Number(left?.[1])).toBeGreaterThan(0);
      expect(Number(left?.[1])).toBeLessThanOrEqual(30_000);
      const json = await runMain(["status", "report", "--backend", url, "--json"]);
      const line = JSON.parse(json.out) as { remainingMs: number | null };
      expect(line.remainingMs).toBeGreaterThan(0);
      expect(line.remainingMs).toBeLessThanOrEqual(30_000);
    } finally {
      await coordinator.close();
    }
  });
});
