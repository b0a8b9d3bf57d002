import { getHeapSpaceStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { NameTable } from "../../src/helpers/name-table.js";

/** Bytes in use in V8's old generation now. */
function oldSpaceUsed(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === "old_space")?.space_used_size ?? 0;
}

describe("NameTable (registries by lock name: held, pending, locked in process)", () => {
  it("gets, sets and deletes like a Map, and counts what it holds", () => {
    const table = new NameTable<{ token: bigint }>();
    expect(table.get("a")).toBeUndefined();
    expect(table.has("a")).toBe(false);
    expect(table.delete("a")).toBe(false);
    const a = { token: 1n };
    table.set("a", a).set("b", { token: 2n });
    expect(table.get("a")).toBe(a);
    expect(table.has("b")).toBe(true);
    expect(table.size).toBe(2);
    table.set("a", { token: 3n }); // replaces, does not add
    expect(table.size).toBe(2);
    expect(table.get("a")?.token).toBe(3n);
    expect(table.delete("a")).toBe(true);
    expect(table.delete("a")).toBe(false); // twice
    expect(table.get("a")).toBeUndefined();
    expect(table.has("a")).toBe(false);
    expect(table.size).toBe(1);
    table.set("a", a); // and back
    expect(table.get("a")).toBe(a);
    expect(table.size).toBe(2);
  });

  it("takes any name, including ones that look like numbers or object keys", () => {
    const table = new NameTable<number>();
    const names = ["0", "42", "__proto__", "constructor", "toString", "", "a/b c"];
    for (const [i, name] of names.entries()) table.set(name, i);
    expect(names.map((name) => table.get(name))).toEqual(names.map((_, i) => i));
    expect(table.size).toBe(names.length);
    expect(table.has("hasOwnProperty")).toBe(false);
    for (const name of names) expect(table.delete(name)).toBe(true);
    expect(table.size).toBe(0);
  });

  it("lists only the live names, and the lists are copies", () => {
    const table = new NameTable<string>();
    for (const name of ["x", "y", "z"]) table.set(name, name.toUpperCase());
    table.delete("y");
    expect(table.keys()).toEqual(["x", "z"]);
    expect(table.values()).toEqual(["X", "Z"]);
    expect(table.entries()).toEqual([
      ["x", "X"],
      ["z", "Z"],
    ]);
    for (const name of table.keys()) table.delete(name); // while going through it
    expect(table.size).toBe(0);
    expect(table.entries()).toEqual([]);
    table.set("y", "again");
    table.clear();
    expect(table.size).toBe(0);
    expect(table.get("y")).toBeUndefined();
  });

  it("keeps every live entry through the compactions of many distinct names", () => {
    const table = new NameTable<{ n: number }>();
    const kept = new Map<string, { n: number }>();
    for (let i = 0; i < 20_000; i++) {
      const name = `invoice/${i}`;
      const value = { n: i };
      table.set(name, value);
      if (i % 7 === 0) kept.set(name, value);
      else expect(table.delete(name)).toBe(true);
      if (i % 5_000 === 0) {
        expect(table.size).toBe(kept.size);
      }
    }
    expect(table.size).toBe(kept.size);
    for (const [name, value] of kept) expect(table.get(name)).toBe(value);
    expect(new Set(table.keys())).toEqual(new Set(kept.keys()));
    expect(table.get("invoice/1")).toBeUndefined();
  });

  it("a table churned by many callers leaves its garbage young (a Map here moves megabytes to the old generation)", () => {
    const table = new NameTable<{ name: string; n: number }>();
    // Young-generation collections until the table has moved to the old generation.
    let junk: { i: number }[] = [];
    for (let i = 0; i < 400_000; i++) {
      junk.push({ i });
      if (junk.length > 1_000) junk = [];
    }
    for (let i = 0; i < 16; i++) table.set(`warm/${i}`, { name: `warm/${i}`, n: i });
    const before = oldSpaceUsed();
    // 16 callers at a time over 1,000 names, as a busy service takes its locks.
    const live: string[] = [];
    for (let i = 0; i < 200_000; i++) {
      const name = `lock/${Math.floor(Math.random() * 1_000)}`;
      if (table.has(name)) continue;
      table.set(name, { name, n: i });
      live.push(name);
      if (live.length > 16) table.delete(live.shift() as string);
    }
    const grownBytes = oldSpaceUsed() - before;
    expect(grownBytes).toBeLessThan(1_000_000);
  });
});
