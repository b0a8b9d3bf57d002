import { describe, expect, it } from "vitest";
import { type PermitNode, parsePermitNode } from "../src/zookeeper-keys.js";
import { grantedEntries, permitTurn } from "../src/zookeeper-permits.js";

const ID = "33036240-0ffe-4c19-b375-91900f598777";

/** A queue in order from short forms: `3/5` (3 permits of 5), `r` (a read), `w` (a write). */
function queue(...entries: string[]): PermitNode[] {
  return entries.map((e, i) => {
    const seq = String(i + 10).padStart(10, "0");
    const name = e.includes("/")
      ? `_c_${ID}-lease-${e.replace("/", "-of-")}-${seq}`
      : e === "w"
        ? `_c_${ID}-__WRIT__${seq}`
        : `_c_${ID}-__READ__${seq}`;
    return parsePermitNode(name) as PermitNode;
  });
}

describe("zookeeper permit queue turns", () => {
  it("grants an entry when the permits ahead of it plus its own fit the limit", () => {
    const q = queue("1/3", "1/3", "1/3", "1/3");
    expect(permitTurn(q, q[2]?.name as string, true)).toEqual({ kind: "granted" });
    // Several holders block the fourth together: no single node to watch.
    expect(permitTurn(q, q[3]?.name as string, true)).toEqual({
      kind: "waiting",
      blocker: undefined,
    });
  });

  it("never lets an entry overtake a waiting one, and names the one that blocks it alone", () => {
    const q = queue("1/3", "3/3", "1/3");
    expect(permitTurn(q, q[1]?.name as string, true)).toMatchObject({ kind: "waiting" });
    expect(permitTurn(q, q[2]?.name as string, true)).toEqual({
      kind: "waiting",
      blocker: q[1],
    });
  });

  it("holds a read behind the nearest write, and a write behind the entry just ahead", () => {
    const q = queue("r", "w", "r", "r", "w");
    expect(permitTurn(q, q[0]?.name as string, true)).toEqual({ kind: "granted" });
    expect(permitTurn(q, q[1]?.name as string, true)).toEqual({ kind: "waiting", blocker: q[0] });
    expect(permitTurn(q, q[3]?.name as string, true)).toEqual({ kind: "waiting", blocker: q[1] });
    expect(permitTurn(q, q[4]?.name as string, true)).toEqual({ kind: "waiting", blocker: q[3] });
  });

  it("on the first list, refuses an entry behind one made with another limit", () => {
    const q = queue("1/3", "1/5");
    expect(permitTurn(q, q[1]?.name as string, true)).toEqual({ kind: "mismatch", stored: 3 });
    expect(permitTurn(q, q[0]?.name as string, true)).toEqual({ kind: "granted" });
    expect(permitTurn(q, "missing", true)).toEqual({ kind: "vanished" });
  });

  it("lists as holders the run from the front that fits the first entry's limit", () => {
    expect(grantedEntries(queue("1/3", "2/3", "1/3")).length).toBe(2);
    expect(grantedEntries(queue("r", "r", "w", "r")).map((n) => n.mode)).toEqual(["read", "read"]);
    expect(grantedEntries(queue("1/3", "1/5", "2/3")).map((n) => n.limit)).toEqual([3, 3]);
    expect(grantedEntries([])).toEqual([]);
  });
});
