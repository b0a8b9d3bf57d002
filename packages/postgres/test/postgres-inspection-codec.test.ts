import { describe, expect, it } from "vitest";
import {
  decodeInspectedLock,
  decodeInspectedPermit,
  decodeKeyPage,
  decodeLeaseRevocations,
  decodeRenewalRow,
  withHeldMs,
} from "../src/postgres-codec.js";
import { prefixEnd } from "../src/postgres-inspection.js";

// Rows as pg returns them for the inspection statements (bigint as text, int and float8 as
// numbers, text[] as arrays, json parsed).
describe("postgres inspection codec (no I/O)", () => {
  it("a full page's last key is the next cursor; a shorter page ends the list", () => {
    expect(decodeKeyPage([{ name: "a" }, { name: "b" }], 2)).toEqual({
      keys: ["a", "b"],
      cursor: "b",
    });
    expect(decodeKeyPage([{ name: "c" }], 2)).toEqual({ keys: ["c"] });
    expect(decodeKeyPage([], 2)).toEqual({ keys: [] });
  });

  it("a prefix's end is the least string above every string with that prefix", () => {
    expect(prefixEnd("")).toBeNull();
    expect(prefixEnd("jobs/")).toBe("jobs0");
    expect(prefixEnd("a\u{10ffff}")).toBeNull();
    expect(prefixEnd("a\ud7ff")).toBe("a\ue000");
    expect(prefixEnd("x😀")).toBe("x😁");
    for (const name of ["jobs/", "jobs/a", "jobs/\u{10fffe}", "jobs/😀"]) {
      expect(Buffer.compare(Buffer.from(name), Buffer.from("jobs0"))).toBe(-1);
    }
  });

  it("advisory renewal rows: a lost key, or a revocation with its token, reason and permit key", () => {
    expect(decodeRenewalRow({ key: "-42", token: null, reason: null })).toEqual({ key: -42n });
    expect(
      decodeRenewalRow({ key: "7", token: "1765000000000123", reason: "stuck since the deploy" }),
    ).toEqual({ key: 7n, revoked: { token: 1765000000000123n, reason: "stuck since the deploy" } });
    expect(decodeRenewalRow({ key: "0", token: "9", reason: "why", name: "pool" })).toEqual({
      key: 0n,
      revoked: { token: 9n, reason: "why", permit: "pool" },
    });
  });

  it("row-lease revocations: a JSON array of [name, token, reason], NULL for none", () => {
    expect(decodeLeaseRevocations(null)).toEqual([]);
    expect(decodeLeaseRevocations([["jobs/a", "1765000000000123", "why"]])).toEqual([
      { name: "jobs/a", token: 1765000000000123n, reason: "why" },
    ]);
  });

  it("an inspected lock: holder and waiters; owners only when every waiter is a session's", () => {
    const held = {
      owner: "a",
      token: "12",
      value: null,
      remaining_ms: 900,
      waiting: 2,
      waiters: ["b", "c"],
    };
    expect(decodeInspectedLock([held])).toEqual({
      holders: [{ ownerId: "a", token: 12n, remainingMs: 900 }],
      waiters: { count: 2, ownerIds: ["b", "c"] },
    });
    expect(decodeInspectedLock([{ ...held, waiters: ["b"] }])?.waiters).toEqual({ count: 2 });
    expect(decodeInspectedLock([{ ...held, waiting: 0, waiters: null }])).toEqual({
      holders: [{ ownerId: "a", token: 12n, remainingMs: 900 }],
    });
    const free = { owner: null, token: null, value: null, remaining_ms: null };
    expect(decodeInspectedLock([{ ...free, waiting: 0, waiters: null }])).toBeNull();
    expect(decodeInspectedLock([{ ...free, waiting: 1, waiters: null }])).toEqual({
      holders: [],
      waiters: { count: 1 },
    });
  });

  it("an inspected permit key: granted entries as holders, the rest as waiters in order, the limit", () => {
    const entry = { value: null, permits: 1, mode: "permit", limit: 3 };
    expect(
      decodeInspectedPermit([
        { ...entry, owner: "a", token: "5", granted: true, value: "v" },
        { ...entry, owner: "b", token: null, granted: false, permits: 3 },
      ]),
    ).toEqual({
      holders: [{ ownerId: "a", token: 5n, permits: 1, mode: "permit", value: "v" }],
      waiters: { count: 1, ownerIds: ["b"] },
      limit: 3,
    });
    expect(decodeInspectedPermit([])).toBeNull();
  });

  it("a lease's time held, when the row tells it", () => {
    const holder = { ownerId: "a", token: 1n };
    expect(withHeldMs(holder, 1500)).toEqual({ ...holder, heldMs: 1500 });
    expect(withHeldMs(holder, null)).toEqual(holder);
  });
});
