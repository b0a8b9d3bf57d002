import { describe, expect, it } from "vitest";
import { createCoordinator, SessionLostError } from "../../src/index.js";
import { setup } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

describe("fencing tokens", () => {
  it("strictly increase over every grant of a name, across coordinators, releases and losses", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const otherBackend = new ScriptedBackend({ clock, store: backend.inner.store });
    const other = createCoordinator({ backend: otherBackend, clock, ttlMs });
    const tokens: bigint[] = [];
    for (let i = 0; i < 12; i++) {
      const c = i % 2 === 0 ? coordinator : other;
      const lock = await c.acquire("jobs", { waitMs: 0 });
      tokens.push(lock.token);
      if (i % 3 === 0) {
        // Lose it instead of releasing: the session ends.
        const b = i % 2 === 0 ? backend : otherBackend;
        b.lastSession.loseNow(new SessionLostError("gone"));
      } else await lock.release();
    }
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i] as bigint).toBeGreaterThan(tokens[i - 1] as bigint);
    }
  });

  it("a waiter handed the lock gets a greater token than the holder it waited for", async () => {
    const { clock, backend, coordinator, ttlMs } = setup({ ttlMs: 1_000 });
    const other = createCoordinator({
      backend: new ScriptedBackend({ clock, store: backend.inner.store }),
      clock,
      ttlMs,
    });
    const first = await other.acquire("jobs", { waitMs: 0 });
    const waiting = coordinator.acquire("jobs", { waitMs: 5_000 });
    await first.release();
    expect((await waiting).token).toBeGreaterThan(first.token);
  });

  it("are bigints, shown by holder() with the owner and value", async () => {
    const { coordinator } = setup({ ownerId: "worker-1" });
    const lock = await coordinator.acquire("jobs", { waitMs: 0, value: "10.0.0.7:8080" });
    expect(typeof lock.token).toBe("bigint");
    expect(await coordinator.holder("jobs")).toEqual({
      ownerId: "worker-1",
      token: lock.token,
      value: "10.0.0.7:8080",
      remainingMs: expect.any(Number),
    });
  });
});
