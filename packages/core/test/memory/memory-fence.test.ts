import { describe, expect, it } from "vitest";
import { MemoryFence, StaleTokenError } from "../../src/index.js";
import { rejectionOf } from "../support/helpers.js";

describe("MemoryFence", () => {
  it("rejects a stale token with StaleTokenError and does not run the write", async () => {
    const fence = new MemoryFence();
    await fence.raise("invoices", 5n);
    let ran = false;
    const error = await rejectionOf(
      fence.write("invoices", 4n, () => {
        ran = true;
      }),
    );
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(error).toMatchObject({ resource: "invoices", token: 4n, highest: 5n });
    expect(ran).toBe(false);
    expect(fence.highest("invoices")).toBe(5n);
  });

  it("accepts writes with the same token repeatedly", async () => {
    const fence = new MemoryFence();
    await fence.raise("invoices", 7n);
    const results: number[] = [];
    for (let i = 0; i < 5; i++) results.push(await fence.write("invoices", 7n, () => i));
    expect(results).toEqual([0, 1, 2, 3, 4]);
    expect(fence.stats).toEqual({ accepted: 6, rejected: 0 });
  });

  it("a newer token raises the fence and shuts the older one out", async () => {
    const fence = new MemoryFence();
    await fence.write("invoices", 1n, () => "old");
    await fence.write("invoices", 2n, () => "new");
    await expect(fence.write("invoices", 1n, () => "old again")).rejects.toBeInstanceOf(
      StaleTokenError,
    );
    await expect(fence.raise("invoices", 1n)).rejects.toBeInstanceOf(StaleTokenError);
    expect(fence.highest("invoices")).toBe(2n);
    expect(fence.stats).toEqual({ accepted: 2, rejected: 2 });
  });

  it("resources are fenced independently", async () => {
    const fence = new MemoryFence();
    await fence.raise("a", 10n);
    expect(await fence.write("b", 1n, () => "ok")).toBe("ok");
    expect(fence.highest("a")).toBe(10n);
    expect(fence.highest("b")).toBe(1n);
    expect(fence.highest("c")).toBeUndefined();
  });

  it("serialises writes per resource: a stale write queued behind a newer one is rejected", async () => {
    const fence = new MemoryFence();
    const order: string[] = [];
    let finish: (() => void) | undefined;
    const newer = fence.write("r", 2n, async () => {
      order.push("newer start");
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      order.push("newer end");
    });
    const stale = fence.write("r", 1n, () => {
      order.push("stale ran");
    });
    const staleResult = stale.then(
      () => "applied",
      (e: unknown) => e,
    );
    await new Promise((resolve) => setImmediate(resolve));
    finish?.();
    await newer;
    expect(await staleResult).toBeInstanceOf(StaleTokenError);
    expect(order).toEqual(["newer start", "newer end"]);
  });

  it("a write that throws still raised the fence, and later writes go on", async () => {
    const fence = new MemoryFence();
    await expect(
      fence.write("r", 3n, () => {
        throw new Error("disk full");
      }),
    ).rejects.toThrow("disk full");
    expect(fence.highest("r")).toBe(3n);
    expect(await fence.write("r", 3n, () => "ok")).toBe("ok");
  });
});
