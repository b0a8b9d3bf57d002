import type { ListKeysOptions } from "@baton/core";
import { describe, expect, it } from "vitest";
import { listPage } from "../src/redis-inspection.js";
import { keySpaceLayout, lockKeys } from "../src/redis-keys.js";
import type { ScanTarget } from "../src/scan-targets.js";

const never = new AbortController().signal;
const layout = keySpaceLayout("baton:", "lock", "jobs/");
const lockKey = (name: string) => lockKeys("baton:", name).lock;
const direct = <T>(what: Promise<T>) => what;

/** One node whose keys fit one SCAN call, returned in a new order by each call. */
function reordering(names: readonly string[]): ScanTarget & { calls: number } {
  const target = {
    address: "",
    calls: 0,
    async scan(): Promise<[string, string[]]> {
      target.calls++;
      // Rotated by one per call, as a server resizing its table may return them.
      const keys = names.map(lockKey);
      const by = target.calls % keys.length;
      return ["0", [...keys.slice(by), ...keys.slice(0, by)]];
    },
  };
  return target;
}

async function listAll(targets: readonly ScanTarget[], limit: number): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const options: ListKeysOptions = {
      space: "lock",
      prefix: "jobs/",
      limit,
      signal: never,
      ...(cursor === undefined ? {} : { cursor }),
    };
    const page = await listPage(targets, layout, options, direct, async (batch) =>
      batch.flatMap((key) => {
        const name = layout.nameOf(key);
        return name === undefined ? [] : [name];
      }),
    );
    pages.push([...page.keys]);
    cursor = page.cursor;
  } while (cursor !== undefined && pages.length < 20);
  return pages;
}

describe("redis listing pages", () => {
  it("lists every name once when a batch is split over pages and SCAN reorders it", async () => {
    const names = Array.from({ length: 7 }, (_, i) => `jobs/${i}`);
    const node = reordering(names);
    const pages = await listAll([node], 3);
    expect(pages.length).toBeGreaterThan(1);
    expect(pages.every((p) => p.length <= 3)).toBe(true);
    expect(pages.flat()).toEqual(names);
    // The batch was scanned again for each page, in another order each time.
    expect(node.calls).toBe(pages.length);
  });

  it("goes on to the next node after the last of a split batch", async () => {
    const first = reordering(["jobs/a", "jobs/b", "jobs/c"]);
    const second = reordering(["jobs/d", "jobs/e"]);
    const pages = await listAll([first, second], 2);
    expect(pages.flat()).toEqual(["jobs/a", "jobs/b", "jobs/c", "jobs/d", "jobs/e"]);
  });
});
