import { setTimeout as delay } from "node:timers/promises";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  MemoryBackend,
  MemoryStore,
  type RunContext,
  type RunOnceResult,
  RunTimeoutError,
} from "@baton/core";
import cron, { type ScheduledTask, type TaskContext } from "node-cron";
import { afterEach, describe, expect, it } from "vitest";
import { type BatonRunCoordinator, batonRunCoordinator, type CronFire } from "../src/index.js";

const open: Coordinator[] = [];
const tasks: ScheduledTask[] = [];
afterEach(async () => {
  await Promise.allSettled(tasks.splice(0).map((t) => t.destroy()));
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

/** Replicas sharing one store, as processes share one server. */
function replicas(count: number, ttlMs = 1_000): Coordinator[] {
  const store = new MemoryStore();
  return Array.from({ length: count }, (_, i) => {
    const c = createCoordinator({
      backend: new MemoryBackend({ store }),
      ttlMs,
      ownerId: `replica-${i}`,
    });
    open.push(c);
    return c;
  });
}

/** What node-cron gives a task function for the fire at `date` of the task `name`. */
function contextOf(name: string, date: Date): TaskContext {
  return {
    date,
    dateLocalIso: date.toISOString(),
    triggeredAt: new Date(),
    task: { name } as never,
  };
}

const FIRE = new Date("2026-12-01T02:00:00.000Z");
const KEY = `nightly:${FIRE.toISOString()}`;

describe("batonRunCoordinator", () => {
  it("runs each fire of a per-second task once across three replicas scheduled by node-cron", async () => {
    const name = `every-second-${Math.random().toString(36).slice(2, 8)}`;
    const ran: { slot: string; replica: number; token: bigint }[] = [];
    const results: { replica: number; fire: CronFire; outcome: string }[] = [];
    const missed = new Set<string>();
    replicas(3).forEach((coordinator, replica) => {
      const runs = batonRunCoordinator(coordinator, {
        onResult: (result, fire) => results.push({ replica, fire, outcome: result.outcome }),
      });
      const task = cron.schedule(
        "* * * * * *",
        runs.task(async ({ slot, token }) => {
          ran.push({ slot, replica, token });
          await delay(100);
        }),
        { name, distributed: true, runCoordinator: runs, distributedLease: 1_000 },
      );
      task.on("execution:missed", (context) => {
        missed.add(context.date.toISOString().replace(".000Z", "Z"));
      });
      tasks.push(task);
    });
    await delay(4_500);
    await Promise.all(tasks.map((t) => t.stop()));
    await delay(500);
    const bySlot = new Map<string, number>();
    for (const r of ran) bySlot.set(r.slot, (bySlot.get(r.slot) ?? 0) + 1);
    const ranSlots = new Set(results.filter((r) => r.outcome === "ran").map((r) => r.fire.slot));
    const asked = new Set(results.map((r) => r.fire.slot));
    console.info(
      `[node-cron in one process] ${asked.size} fires, ${ran.length} runs, ${missed.size} missed by a replica`,
    );
    expect(asked.size).toBeGreaterThanOrEqual(3);
    // Every fire any replica asked about ran exactly once, and was recorded as run once.
    expect(
      [...bySlot.values()].every((n) => n === 1),
      JSON.stringify([...bySlot]),
    ).toBe(true);
    expect([...asked].sort()).toEqual([...bySlot.keys()].sort());
    expect([...ranSlots].sort()).toEqual([...asked].sort());
    for (const r of results) expect(r.fire.job).toBe(name);
  }, 20_000);

  it("holds the fire's lock from shouldRun until onComplete, then records it done", async () => {
    const [a, b] = replicas(2) as [Coordinator, Coordinator];
    const runs = batonRunCoordinator(a);
    expect(await runs.shouldRun(KEY, 1_000)).toBe(true);
    const holder = await b.holder("nightly/slot/2026-12-01T02:00:00Z");
    expect(holder?.ownerId).toBe("replica-0");
    await runs.onComplete(KEY);
    expect(await b.holder("nightly/slot/2026-12-01T02:00:00Z")).toBeNull();
    // The fire is done: the same slot through runOnce, or another replica's fire, is skipped.
    const again = await b.runOnce("nightly", "2026-12-01T02:00:00Z", () => "ran again");
    expect(again.outcome).toBe("already-done");
    expect(await batonRunCoordinator(b).shouldRun(KEY, 1_000)).toBe(false);
  });

  it("gives a wrapped task its fire's token, signal and attempt; runOf finds them too", async () => {
    const [a] = replicas(1) as [Coordinator];
    const runs = batonRunCoordinator(a);
    expect(await runs.shouldRun(KEY, 1_000)).toBe(true);
    const context = contextOf("nightly", FIRE);
    const seen = await runs.task((run: RunContext, ctx: TaskContext) => ({
      run,
      same: runs.runOf(ctx) === run,
    }))(context);
    expect(seen.run).toMatchObject({ job: "nightly", slot: "2026-12-01T02:00:00Z", attempt: 1 });
    expect(seen.run.token).toBeGreaterThan(0n);
    expect(seen.run.signal.aborted).toBe(false);
    expect(seen.same).toBe(true);
    await runs.onComplete(KEY);
    expect(seen.run.signal.aborted).toBe(true);
    expect(runs.runOf(context)).toBeUndefined();
  });

  it("records a wrapped task that throws as failed; a waiting replica runs the fire again", async () => {
    const [a, b] = replicas(2) as [Coordinator, Coordinator];
    const results: RunOnceResult<unknown>[] = [];
    const first = batonRunCoordinator(a, { onResult: (r) => results.push(r) });
    const second = batonRunCoordinator(b, { onResult: (r) => results.push(r) });
    expect(await first.shouldRun(KEY, 1_000)).toBe(true);
    // The second replica asks while the first runs: it waits.
    const waiting = second.shouldRun(KEY, 1_000);
    const boom = new Error("the backup failed");
    const task = first.task(() => {
      throw boom;
    });
    await expect(task(contextOf("nightly", FIRE))).rejects.toBe(boom);
    // The task's own error is node-cron's to log: onComplete does not throw it again.
    await first.onComplete(KEY);
    expect(results[0]).toMatchObject({ outcome: "failed", error: boom, attempt: 1 });
    expect(await waiting).toBe(true);
    const retry = await second.task((run) => run.attempt)(contextOf("nightly", FIRE));
    expect(retry).toBe(2);
    await second.onComplete(KEY);
    expect(results[1]).toMatchObject({ outcome: "ran", attempt: 2 });
  });

  it("records an unwrapped task as done whatever it did: node-cron does not say how it ended", async () => {
    const [a, b] = replicas(2) as [Coordinator, Coordinator];
    const runs = batonRunCoordinator(a);
    expect(await runs.shouldRun(KEY, 1_000)).toBe(true);
    await runs.onComplete(KEY);
    const record = await b.runOnce("nightly", "2026-12-01T02:00:00Z", () => undefined);
    expect(record).toMatchObject({ outcome: "already-done", record: { state: "done" } });
  });

  it("takes over a fire whose replica ended without completing it", async () => {
    const [a, b] = replicas(2, 500) as [Coordinator, Coordinator];
    const first = batonRunCoordinator(a);
    const second = batonRunCoordinator(b);
    expect(await first.shouldRun(KEY, 500)).toBe(true);
    const firstToken = first.runOf(contextOf("nightly", FIRE))?.token ?? 0n;
    const waiting = second.shouldRun(KEY, 500);
    // The first replica goes away mid-run (its locks end; its record says "running").
    await a.close();
    expect(await waiting).toBe(true);
    const run = second.runOf(contextOf("nightly", FIRE));
    expect(run?.attempt).toBe(2);
    expect(run?.token).toBeGreaterThan(firstToken);
    await second.onComplete(KEY);
  });

  it("answers false at once with waitMs 0 while another replica runs the fire", async () => {
    const [a, b] = replicas(2) as [Coordinator, Coordinator];
    const first = batonRunCoordinator(a);
    expect(await first.shouldRun(KEY, 1_000)).toBe(true);
    const outcomes: string[] = [];
    const second = batonRunCoordinator(b, {
      waitMs: 0,
      onResult: (r) => outcomes.push(r.outcome),
    });
    expect(await second.shouldRun(KEY, 1_000)).toBe(false);
    expect(outcomes).toEqual(["running-elsewhere"]);
    await first.onComplete(KEY);
  });

  it("onComplete rejects with Baton's failure when the run outlived atMostMs", async () => {
    const [a] = replicas(1) as [Coordinator];
    const runs = batonRunCoordinator(a, { atMostMs: 50 });
    expect(await runs.shouldRun(KEY, 1_000)).toBe(true);
    const signal = runs.runOf(contextOf("nightly", FIRE))?.signal;
    await delay(200);
    expect(signal?.aborted).toBe(true);
    await expect(runs.onComplete(KEY)).rejects.toBeInstanceOf(RunTimeoutError);
  });

  it("close() ends the waits on other replicas' runs with false, and answers false later", async () => {
    const [a, b] = replicas(2) as [Coordinator, Coordinator];
    const first = batonRunCoordinator(a);
    const second = batonRunCoordinator(b);
    expect(await first.shouldRun(KEY, 1_000)).toBe(true);
    const waiting = second.shouldRun(KEY, 1_000);
    await delay(50);
    second.close();
    expect(await waiting).toBe(false);
    expect(await second.shouldRun(`nightly:${new Date(0).toISOString()}`, 1_000)).toBe(false);
    // The first replica's run is untouched: it completes and records the fire.
    await first.onComplete(KEY);
    const after = await b.runOnce("nightly", "2026-12-01T02:00:00Z", () => undefined);
    expect(after.outcome).toBe("already-done");
  });

  it("uses ttlMs over node-cron's lease when given", async () => {
    const [a, b] = replicas(2) as [Coordinator, Coordinator];
    const runs = batonRunCoordinator(a, { ttlMs: 700 });
    expect(await runs.shouldRun(KEY, 30_000)).toBe(true);
    const holder = await b.holder("nightly/slot/2026-12-01T02:00:00Z");
    expect(holder?.ownerId).toBe("replica-0");
    await runs.onComplete(KEY);
  });

  it("rejects what is not node-cron's key, and a wrapped task run outside a fire", async () => {
    const [a] = replicas(1) as [Coordinator];
    const runs: BatonRunCoordinator = batonRunCoordinator(a);
    await expect(runs.shouldRun("nightly", 1_000)).rejects.toMatchObject({ field: "key" });
    await expect(runs.shouldRun("nightly:yesterday", 1_000)).rejects.toBeInstanceOf(ConfigError);
    const task = runs.task(() => "ran");
    await expect(task(contextOf("nightly", FIRE))).rejects.toMatchObject({
      name: "ConfigError",
      field: "task",
    });
  });

  it("checks its options before any I/O, naming the field", () => {
    const [a] = replicas(1) as [Coordinator];
    expect(() => batonRunCoordinator({} as Coordinator)).toThrow(/coordinator/);
    expect(() => batonRunCoordinator(a, { atMostMs: 0 })).toThrow(/atMostMs/);
    expect(() => batonRunCoordinator(a, { waitMs: -1 })).toThrow(/waitMs/);
    expect(() => batonRunCoordinator(a, { maxAttempts: 1.5 })).toThrow(/maxAttempts/);
    expect(() => batonRunCoordinator(a, { ttlMs: 1 })).toThrow(/ttlMs/);
    expect(() => batonRunCoordinator(a, { onResult: 1 as never })).toThrow(/onResult/);
    expect(() => batonRunCoordinator(a, { waitMS: 1 } as never)).toThrow(/waitMS/);
    const runs = batonRunCoordinator(a);
    expect(() => runs.task(undefined as never)).toThrow(ConfigError);
  });
});
