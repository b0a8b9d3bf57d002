import type { CoordinatorEventName, CoordinatorEvents } from "@baton/core";
import { describe, expect, it } from "vitest";
import { delay, type SuiteContext } from "../suite-context.js";

/**
 * The coordinator's signals about contention and long holds, which rest on the backend: a
 * backend reads an acquire's signal only when it is about to wait (that read is the
 * contention), and renews a held lock without core re-arming its `warnHeldMs` timer.
 */
export function signalsGroup(ctx: SuiteContext): void {
  describe("contention and long-hold signals", () => {
    it(
      "warnHeldMs fires once for a lock held past it, through several renewals",
      async () => {
        const ttl = ctx.target.ttlMs;
        const coordinator = ctx.coordinator({ warnHeldMs: ttl });
        const events = record(coordinator, ["heldTooLong", "renewed"]);
        const name = ctx.name("held-too-long");
        const lock = await coordinator.acquire(name);
        // Past the threshold by two more TTLs: about six renewals.
        await delay(ttl * 3);
        expect(lock.held).toBe(true);
        expect(events.renewed.length).toBeGreaterThanOrEqual(3);
        expect(events.heldTooLong).toHaveLength(1);
        const [warned] = events.heldTooLong;
        expect(warned).toMatchObject({
          name,
          ownerId: coordinator.ownerId,
          thresholdMs: ttl,
          lock,
        });
        expect(warned?.heldMs).toBeGreaterThanOrEqual(ttl);
        await lock.release();
      },
      ctx.target.ttlMs * 3 + 30_000,
    );

    it(
      "a wait for a lock held by another session: contended, waitStarted, waitingTooLong once, waitEnded, acquired",
      async () => {
        const ttl = ctx.target.ttlMs;
        const name = ctx.name("waiting-too-long");
        const holding = ctx.coordinator();
        const holder = await holding.acquire(name);
        const waiter = ctx.coordinator({ warnWaitMs: Math.ceil(ttl / 2) });
        const seen: CoordinatorEventName[] = [];
        const events = record(waiter, [
          "contended",
          "waitStarted",
          "waitingTooLong",
          "waitEnded",
          "acquired",
        ]);
        for (const event of Object.keys(events) as CoordinatorEventName[]) {
          waiter.on(event, () => seen.push(event));
        }
        const waiting = waiter.acquire(name, { waitMs: ttl * 20 });
        await delay(ttl * 2);
        await holder.release();
        const lock = await waiting;
        expect(seen).toEqual([
          "contended",
          "waitStarted",
          "waitingTooLong",
          "waitEnded",
          "acquired",
        ]);
        // The warning names who was waited for, as the store told.
        expect(events.waitingTooLong[0]?.holder?.ownerId).toBe(holding.ownerId);
        if (ctx.backend.guarantees.fencing !== "none")
          expect(events.waitingTooLong[0]?.holder?.token).toBe(holder.token);
        expect(events.waitEnded[0]).toMatchObject({ name, outcome: "acquired" });
        expect(events.waitEnded[0]?.waitedMs).toBeGreaterThanOrEqual(ttl * 2 - 50);
        expect(events.acquired[0]?.lock).toBe(lock);
        await lock.release();
      },
      ctx.target.ttlMs * 2 + 60_000,
    );

    it("an uncontended acquire is not contended and waits for nothing", async () => {
      const coordinator = ctx.coordinator({ warnWaitMs: 1 });
      const events = record(coordinator, ["contended", "waitStarted", "waitingTooLong"]);
      for (let i = 0; i < 3; i++) {
        const lock = await coordinator.acquire(ctx.name("free"));
        await lock.release();
      }
      expect(events).toEqual({ contended: [], waitStarted: [], waitingTooLong: [] });
    });
  });
}

/** Every payload of the given events. */
function record<E extends CoordinatorEventName>(
  coordinator: ReturnType<SuiteContext["coordinator"]>,
  names: readonly E[],
): { [K in E]: CoordinatorEvents[K][] } {
  const out = {} as { [K in E]: CoordinatorEvents[K][] };
  for (const name of names) {
    const list: CoordinatorEvents[E][] = [];
    out[name] = list as (typeof out)[E];
    coordinator.on(name, (payload) => {
      list.push(payload);
    });
  }
  return out;
}
