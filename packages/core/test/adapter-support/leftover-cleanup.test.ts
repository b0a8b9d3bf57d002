import { describe, expect, it } from "vitest";
import { LeftoverCleanup } from "../../src/adapter-support/leftover-cleanup.js";
import { SessionEnd } from "../../src/adapter-support/session-end.js";
import { SessionLostError } from "../../src/contract/errors.js";

/** A cleanup whose every run is held until the test settles it. */
function heldCleanups() {
  const runs: { name: string; leftover: number; settle: (done: boolean | Error) => void }[] = [];
  const clean = (name: string, leftover: number) =>
    new Promise<boolean>((resolve, reject) => {
      runs.push({
        name,
        leftover,
        settle: (done) => (done instanceof Error ? reject(done) : resolve(done)),
      });
    });
  return { runs, clean };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("LeftoverCleanup", () => {
  it("runs one cleanup per name at a time and forgets a leftover once it is cleaned", async () => {
    const { runs, clean } = heldCleanups();
    const leftovers = new LeftoverCleanup<number>(clean);
    leftovers.remember("a", 1);
    leftovers.remember("b", 2);
    leftovers.retry();
    leftovers.retry();
    expect(runs.map((r) => r.name)).toEqual(["a", "b"]);
    runs[0]?.settle(true);
    runs[1]?.settle(new Error("store unreachable"));
    await tick();
    expect(leftovers.has("a")).toBe(false);
    expect(leftovers.get("b")).toBe(2);
    leftovers.retry();
    expect(runs.map((r) => r.name)).toEqual(["a", "b", "b"]);
  });

  it("keeps a newer leftover remembered while an older one's cleanup ran", async () => {
    const { runs, clean } = heldCleanups();
    const leftovers = new LeftoverCleanup<number>(clean);
    leftovers.remember("a", 1);
    leftovers.retry();
    leftovers.remember("a", 2);
    runs[0]?.settle(true);
    await tick();
    expect(leftovers.get("a")).toBe(2);
  });

  it("starts no cleanup of a name while its acquire runs, and the acquire waits for one running", async () => {
    const { runs, clean } = heldCleanups();
    const leftovers = new LeftoverCleanup<number>(clean);
    leftovers.remember("a", 1);
    leftovers.retry();
    const order: string[] = [];
    const acquire = leftovers.acquiring("a", async () => {
      order.push("acquire");
      leftovers.retry();
      return "granted";
    });
    await tick();
    expect(order).toEqual([]);
    runs[0]?.settle(false);
    await expect(acquire).resolves.toBe("granted");
    expect(order).toEqual(["acquire"]);
    expect(runs).toHaveLength(1);
    leftovers.retry();
    expect(runs).toHaveLength(2);
  });

  it("forgets at once a leftover whose cleanup answers true without a run", () => {
    const leftovers = new LeftoverCleanup<number>(() => true);
    leftovers.remember("a", 1);
    leftovers.retry();
    expect(leftovers.has("a")).toBe(false);
  });

  it("remembers nothing once the session ended", () => {
    const end = new SessionEnd("the session ended");
    const leftovers = new LeftoverCleanup<number>(() => true, end.signal);
    end.close(new SessionLostError("the session was closed"));
    leftovers.remember("a", 1);
    expect(leftovers.has("a")).toBe(false);
  });
});

describe("SessionEnd", () => {
  it("aborts both signals on loss and throws that loss from assertLive", () => {
    const end = new SessionEnd("the session ended");
    expect(() => end.assertLive()).not.toThrow();
    const loss = new SessionLostError("the lease expired");
    end.markLost(loss);
    end.markLost(new SessionLostError("a later loss"));
    expect(end.ended).toBe(true);
    expect(end.signal.reason).toBe(loss);
    expect(end.lost.reason).toBe(loss);
    expect(() => end.assertLive()).toThrow(loss);
  });

  it("aborts only the ending signal on close", () => {
    const end = new SessionEnd("the session ended");
    end.close(new SessionLostError("the session was closed"));
    expect(end.signal.aborted).toBe(true);
    expect(end.lost.aborted).toBe(false);
    expect(() => end.assertLive()).toThrow("the session was closed");
  });
});
