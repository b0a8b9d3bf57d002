import { describe, expect, it } from "vitest";
import { ConfigError, createCoordinator, ManualClock, MemoryFence } from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

/** A coordinator on a backend whose guarantees declare fencing "none", as Redlock does. */
function tokenless() {
  const clock = new ManualClock();
  const backend = new ScriptedBackend({ clock, kind: "redlock", fencing: "none" });
  return { clock, coordinator: createCoordinator({ backend, clock, ttlMs: 1_000 }) };
}

describe('a backend that declares fencing "none"', () => {
  it("grants locks that work without a token: acquire, held, signal, release", async () => {
    const { coordinator } = tokenless();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(await coordinator.tryAcquire("jobs")).toBeNull();
    expect(await lock.release()).toBe(true);
    expect(lock.signal.aborted).toBe(true);
    await coordinator.close();
  });

  it("reading lock.token throws a ConfigError that says why, so it never reaches a fence", async () => {
    const { coordinator } = tokenless();
    const fence = new MemoryFence();
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    let thrown: unknown;
    try {
      await fence.write("jobs", lock.token, () => undefined);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).field).toBe("token");
    expect((thrown as Error).message).toMatch(/no fencing token.*fencing "none"/);
    await lock.release();
    await coordinator.close();
  });

  it("withLock runs and returns; its context's token throws only when read", async () => {
    const { coordinator } = tokenless();
    const result = await coordinator.withLock("jobs", async (context) => {
      expect(context.signal.aborted).toBe(false);
      expect(() => context.token).toThrow(ConfigError);
      return 42;
    });
    expect(result).toBe(42);
    await coordinator.close();
  });

  it("acquired and released events still fire", async () => {
    const { coordinator } = tokenless();
    const seen: string[] = [];
    coordinator.on("acquired", () => seen.push("acquired"));
    coordinator.on("released", () => seen.push("released"));
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await lock.release();
    expect(seen).toEqual(["acquired", "released"]);
    await coordinator.close();
  });

  it("an election elects and revokes; the onElected token throws only when read", async () => {
    const { coordinator } = tokenless();
    const terms: unknown[] = [];
    let tokenRead: unknown;
    let revoked!: () => void;
    const done = new Promise<void>((resolve) => {
      revoked = resolve;
    });
    const election = coordinator.elect("leader", {
      onElected: (info) => {
        terms.push(typeof info.term);
        try {
          void info.token;
        } catch (error) {
          tokenRead = error;
        }
      },
      onRevoked: () => revoked(),
    });
    for (let i = 0; i < 50 && terms.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(terms).toEqual(["bigint"]);
    expect(tokenRead).toBeInstanceOf(ConfigError);
    await election.resign();
    await done;
    await election.close();
    await coordinator.close();
  });

  it("a backend with ordered tokens keeps handing them out", async () => {
    const clock = new ManualClock();
    const backend = new ScriptedBackend({ clock, fencing: "single-node" });
    const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000 });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    expect(typeof lock.token).toBe("bigint");
    await lock.release();
    await coordinator.close();
  });
});
