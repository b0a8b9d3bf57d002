import { describe, expect, it } from "vitest";
import {
  decodeDeleted,
  decodeForceRelease,
  decodeHolder,
  decodeInspectedHolder,
  decodeKeyPage,
  decodeLeaseAcquire,
  decodeLeaseRenewal,
  decodeRecord,
  decodeWrittenVersion,
  encodeExpectedVersion,
  lastRows,
} from "../src/mysql-codec.js";

// Replies recorded from MariaDB 10.11 through mysql2 (multipleStatements, supportBigNumbers,
// bigNumberStrings), for the statements of mysql-lease-statements.ts.
const ok = (affectedRows: number, insertId = 0) => ({
  fieldCount: 0,
  affectedRows,
  insertId,
  info: "",
  serverStatus: 11,
  warningStatus: 0,
  changedRows: 0,
});
const acquireReply = (last: Record<string, unknown>) => [
  ok(0),
  ok(1, 1796573189754131),
  ok(0),
  ok(1),
  ok(0),
  [last],
];

describe("the row-lease acquire's reply", () => {
  it("is a grant when the lease is this session's and carries the counter value this call took", () => {
    const reply = acquireReply({
      token: "1796573189754131",
      mine: 1,
      issued: "1796573189754131",
      live: "1",
      remaining_ms: "994",
    });
    expect(decodeLeaseAcquire(reply)).toEqual({
      token: 1796573189754131n,
      live: true,
      remainingMs: null,
      holderToken: null,
    });
  });

  it("is no grant, with the holder's time left and token, when another session holds the name", () => {
    const reply = acquireReply({
      token: "1796573189754131",
      mine: 0,
      issued: "1796573189754132",
      live: "1",
      remaining_ms: "991",
    });
    expect(decodeLeaseAcquire(reply)).toEqual({
      token: null,
      live: true,
      remainingMs: 991,
      holderToken: "1796573189754131",
    });
  });

  it("is no grant when this session's lease carries an older token (an abandoned acquire's)", () => {
    const reply = acquireReply({
      token: "1796573189754100",
      mine: 1,
      issued: "1796573189754132",
      live: "1",
      remaining_ms: "991",
    });
    expect(decodeLeaseAcquire(reply).token).toBeNull();
  });

  it("tells a session whose row expired (no lease, live 0)", () => {
    const reply = acquireReply({
      token: null,
      mine: null,
      issued: "1796573189754133",
      live: "0",
      remaining_ms: null,
    });
    expect(decodeLeaseAcquire(reply)).toEqual({
      token: null,
      live: false,
      remainingMs: null,
      holderToken: null,
    });
  });

  it("refuses a reply of another shape", () => {
    expect(() => decodeLeaseAcquire(ok(1))).toThrow(/unexpected/);
    expect(() => decodeLeaseAcquire([ok(1), ok(1)])).toThrow(/unexpected/);
  });
});

describe("the renewal's reply", () => {
  it("is live with no revocations", () => {
    expect(decodeLeaseRenewal([ok(1), []])).toEqual({ live: true, revoked: [] });
  });

  it("is lost when the session row matched nothing, whatever else ran", () => {
    expect(decodeLeaseRenewal([ok(0), ok(0), ok(0), []])).toEqual({ live: false, revoked: [] });
  });

  it("carries the revocations, name as text and token as bigint", () => {
    const reply = [ok(1), [{ name: "Invoices é", token: "1796573189754131", reason: "ops" }]];
    expect(decodeLeaseRenewal(reply)).toEqual({
      live: true,
      revoked: [{ name: "Invoices é", token: 1796573189754131n, reason: "ops" }],
    });
  });
});

describe("release, forced release, holder and lists", () => {
  it("a release deleted the lease when affectedRows is 1", () => {
    expect(decodeDeleted(ok(1))).toBe(true);
    expect(decodeDeleted(ok(0))).toBe(false);
  });

  it("a forced release released when its lease DELETE (the third result) deleted a row", () => {
    expect(decodeForceRelease([ok(0), ok(1), ok(1), ok(0)])).toBe(true);
    expect(decodeForceRelease([ok(0), ok(0), ok(0), ok(0)])).toBe(false);
  });

  it("the holder: owner, token, value and time left from decimal strings", () => {
    const rows = [
      {
        owner: "owner-1",
        token: "1796573189754131",
        value: "v1",
        remaining_ms: "990",
        held_ms: "5",
      },
    ];
    expect(decodeHolder(rows)).toEqual({
      ownerId: "owner-1",
      token: 1796573189754131n,
      value: "v1",
      remainingMs: 990,
    });
    expect(decodeInspectedHolder(rows)).toMatchObject({ heldMs: 5, remainingMs: 990 });
    expect(decodeHolder([])).toBeNull();
    expect(
      decodeHolder([{ owner: "o", token: "7", value: null, remaining_ms: "-3", held_ms: null }]),
    ).toEqual({ ownerId: "o", token: 7n, remainingMs: 0 });
  });

  it("a full page carries its last key as the cursor", () => {
    const rows = [{ name: "a" }, { name: "b" }];
    expect(decodeKeyPage(rows, 2)).toEqual({ keys: ["a", "b"], cursor: "b" });
    expect(decodeKeyPage(rows, 3)).toEqual({ keys: ["a", "b"] });
  });

  it("lastRows takes the rows of the last statement, or of the only one", () => {
    expect(lastRows([ok(1), [{ a: 1 }]])).toEqual([{ a: 1 }]);
    expect(lastRows([{ a: 1 }])).toEqual([{ a: 1 }]);
    expect(lastRows([])).toEqual([]);
  });
});

describe("records", () => {
  it("a read is the value and the version as text", () => {
    expect(decodeRecord([{ value: "{}", version: "1796573189992850" }])).toEqual({
      value: "{}",
      version: "1796573189992850",
    });
    expect(decodeRecord([])).toBeNull();
  });

  it("a write's new version is the OK packet's insertId (set by LAST_INSERT_ID(expr))", () => {
    expect(decodeWrittenVersion(ok(1, 1796573189992850))).toBe("1796573189992850");
    expect(decodeWrittenVersion({ ...ok(1), insertId: "18446744073709551615" })).toBe(
      "18446744073709551615",
    );
    expect(decodeWrittenVersion(ok(0))).toBeNull();
  });

  it("an expected version is a bigint, or undefined for anything Baton never wrote", () => {
    expect(encodeExpectedVersion("1796573189992850")).toBe(1796573189992850n);
    expect(encodeExpectedVersion("12a")).toBeUndefined();
    expect(encodeExpectedVersion("")).toBeUndefined();
    expect(encodeExpectedVersion("1".repeat(21))).toBeUndefined();
  });
});
