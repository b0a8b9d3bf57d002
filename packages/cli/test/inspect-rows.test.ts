import { describe, expect, it } from "vitest";
import { markRows } from "../src/commands/top.js";
import type { Inspection } from "../src/inspect/inspection-source.js";
import { formatDuration, formatTable, inspectionJson, rowOf } from "../src/inspect/rows.js";
import type { Snapshot } from "../src/inspect/snapshot.js";
import { diffSnapshots, revocationKey } from "../src/inspect/timeline.js";

const lock = (name: string, owner: string | undefined, token = 1n, remainingMs = 10_000) =>
  ({
    kind: "lock",
    name,
    holders: owner === undefined ? [] : [{ ownerId: owner, token, heldMs: 1_500, remainingMs }],
    waiters: { count: 0 },
  }) satisfies Inspection;

const snap = (at: number, items: Inspection[]): Snapshot => ({
  at,
  items,
  truncated: false,
  tookMs: 1,
});

describe("baton ls lines", () => {
  it("gives kind, name, holder, token, held for, time left and waiters in columns", () => {
    const lines = formatTable([
      rowOf({ ...lock("orders/1", "billing-7f3a", 12n, 4_321), waiters: { count: 2 } }),
      rowOf({
        kind: "semaphore",
        name: "exports",
        holders: [
          { ownerId: "w1", token: 3n, permits: 2 },
          { ownerId: "w2", token: 4n, permits: 1 },
        ],
        permits: { used: 3, limit: 4 },
      }),
    ]);
    expect(lines).toEqual([
      "KIND       NAME      HOLDER        TOKEN  HELD  LEFT  WAITERS",
      "lock       orders/1  billing-7f3a  12     1.5s  4.3s  2",
      "semaphore  exports   w1 +1         3      -     -     0        permits 3/4",
    ]);
  });

  it("writes tokens as decimal strings in --json", () => {
    const big = 2n ** 70n;
    const parsed = JSON.parse(inspectionJson(lock("a", "o", big)));
    expect(parsed.holders[0].token).toBe(big.toString());
    expect(parsed.kind).toBe("lock");
  });

  it("prints durations a person reads, and - when the store does not tell", () => {
    expect(formatDuration(undefined)).toBe("-");
    expect(formatDuration(850)).toBe("850ms");
    expect(formatDuration(12_345)).toBe("12.3s");
    expect(formatDuration(245_000)).toBe("4m05s");
    expect(formatDuration(7_800_000)).toBe("2h10m");
  });
});

describe("baton top marks", () => {
  it("marks a new name +, a changed holder *, and a name gone -", () => {
    const prev = snap(0, [lock("a", "o1"), lock("b", "o2")]);
    const next = snap(1_000, [lock("a", "o3", 2n), lock("c", "o4")]);
    const { rows, marks } = markRows(prev, next);
    expect(rows.map((r, i) => `${marks[i]}${r.name}`)).toEqual(["*a", "+c", "-b"]);
  });

  it("does not mark a holder whose lease was only renewed", () => {
    const { marks } = markRows(
      snap(0, [lock("a", "o1", 1n, 9_000)]),
      snap(1, [lock("a", "o1", 1n, 5_000)]),
    );
    expect(marks).toEqual([" "]);
  });
});

describe("the dashboard's timeline", () => {
  it("tells an acquire, a release, a lease that ran out and a revocation apart", () => {
    const prev = snap(0, [
      lock("released", "o1", 5n),
      lock("expired", "o2", 6n, 100),
      lock("revoked", "o3", 7n),
    ]);
    const next = snap(1_000, [lock("new", "o4", 8n)]);
    const revoked = new Map([[revocationKey("lock", "revoked", "7"), "stuck since Monday"]]);
    const events = diffSnapshots(prev, next, revoked).map((e) => [
      e.type,
      e.name,
      e.token,
      e.detail,
    ]);
    expect(events).toEqual([
      ["released", "released", "5", undefined],
      ["lost", "expired", "6", undefined],
      ["revoked", "revoked", "7", "stuck since Monday"],
      ["acquired", "new", "8", undefined],
    ]);
  });

  it("tells a new leader as elected with its term, and a job's new outcome as job ran", () => {
    const record = { attempt: 1, token: 4n, holder: "n1", startedAt: 0 };
    const job = (state: "running" | "done"): Inspection => ({
      kind: "job",
      name: "invoices",
      holders: [],
      slots: [{ slot: "2026-12-06", record: { ...record, state } }],
    });
    const election = (owner: string, token: bigint): Inspection => ({
      kind: "election",
      name: "scheduler",
      holders: [{ ownerId: owner, token }],
    });
    const events = diffSnapshots(
      snap(0, [election("n1", 3n), job("running")]),
      snap(1_000, [election("n2", 4n), job("done")]),
    );
    expect(events.map((e) => [e.type, e.owner, e.detail])).toEqual([
      ["released", "n1", undefined],
      ["elected", "n2", "term 4"],
      ["job", "n1", "2026-12-06 done (attempt 1)"],
    ]);
  });

  it("tells the slots a job ran since the previous snapshot when the job is first seen", () => {
    const record = (slot: string, startedAt: number) => ({
      slot,
      record: {
        state: "done" as const,
        attempt: 1,
        token: 1n,
        holder: "n1",
        startedAt,
        endedAt: startedAt + 10,
      },
    });
    const job: Inspection = {
      kind: "job",
      name: "invoices",
      holders: [],
      slots: [record("2026-12-06", 1_500), record("2026-12-05", -5_000)],
    };
    const events = diffSnapshots(snap(1_000, []), snap(2_000, [job]));
    expect(events.map((e) => e.detail)).toEqual(["2026-12-06 done (attempt 1)"]);
  });
});
