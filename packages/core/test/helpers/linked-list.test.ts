import { describe, expect, it } from "vitest";
import { type Linked, LinkedList } from "../../src/helpers/linked-list.js";

class Entry implements Linked<Entry> {
  prevLinked: Entry | undefined;
  nextLinked: Entry | undefined;
  constructor(readonly id: number) {}
}

describe("LinkedList (core's registries of in-flight calls and live locks)", () => {
  it("holds what was added and not removed, whatever the order of removal", () => {
    const list = new LinkedList<Entry>();
    const entries = [0, 1, 2, 3, 4].map((id) => new Entry(id));
    for (const entry of entries) list.add(entry);
    expect(list.size).toBe(5);
    expect(list.delete(entries[2] as Entry)).toBe(true); // middle
    expect(list.delete(entries[4] as Entry)).toBe(true); // head (newest)
    expect(list.delete(entries[0] as Entry)).toBe(true); // tail (oldest)
    expect(list.toArray().map((e) => e.id)).toEqual([3, 1]);
    expect(list.size).toBe(2);
    expect(entries.map((e) => list.has(e))).toEqual([false, true, false, true, false]);
  });

  it("removing an entry that is not in the list changes nothing", () => {
    const list = new LinkedList<Entry>();
    const kept = new Entry(1);
    const stranger = new Entry(2);
    list.add(kept);
    expect(list.delete(stranger)).toBe(false);
    expect(list.delete(kept)).toBe(true);
    expect(list.delete(kept)).toBe(false); // twice
    expect(list.size).toBe(0);
    expect(list.toArray()).toEqual([]);
    list.add(kept); // and back in
    expect(list.toArray()).toEqual([kept]);
  });

  it("toArray is a copy: entries may be removed while going through it", () => {
    const list = new LinkedList<Entry>();
    for (let id = 0; id < 4; id++) list.add(new Entry(id));
    for (const entry of list.toArray()) list.delete(entry);
    expect(list.size).toBe(0);
  });
});
