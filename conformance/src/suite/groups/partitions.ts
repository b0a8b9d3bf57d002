import { afterEach, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { delay, type SuiteContext } from "../suite-context.js";
import { pollUntil } from "../worker-candidates.js";

type Owned = Extract<WorkerEvent, { event: "owned" }>;
type Assigned = Extract<WorkerEvent, { event: "assigned" }>;

/** The partitions a worker's assigned/unassigned events say it owns, ascending. */
function ownedFromEvents(worker: LockWorker, name: string): number[] {
  const owned = new Set<number>();
  for (const e of worker.events) {
    if (e.event === "assigned" && e.name === name) owned.add(e.partition);
    if (e.event === "unassigned" && e.name === name) owned.delete(e.partition);
  }
  return [...owned].sort((a, b) => a - b);
}

/** The token of the worker's latest assignment of `partition`. */
function lastToken(worker: LockWorker, name: string, partition: number): bigint | undefined {
  const assigned = worker.events.filter(
    (e): e is Assigned => e.event === "assigned" && e.name === name && e.partition === partition,
  );
  const last = assigned.at(-1);
  return last === undefined ? undefined : BigInt(last.token);
}

/** How many of `owned` (one list per instance) claim each of `count` partitions. */
function ownersPerPartition(owned: readonly number[][], count: number): number[] {
  return Array.from({ length: count }, (_, p) => owned.filter((list) => list.includes(p)).length);
}

/**
 * `coordinator.partitions()` with every instance in its own process: instances split the
 * partitions fairly, each partition has one owner, and a SIGKILLed instance's partitions go
 * to the survivors within the TTL plus slack.
 */
export function partitionsGroup(ctx: SuiteContext, url: () => string): void {
  describe("partitions (worker processes)", () => {
    const workers: LockWorker[] = [];
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
    });

    const start = async (instances: number, name: string, count: number) => {
      const started = await Promise.all(
        Array.from({ length: instances }, (_, i) =>
          spawnLockWorker({ url: url(), ttlMs: ctx.target.ttlMs, ownerId: `member-${i}` }),
        ),
      );
      workers.push(...started);
      for (const w of started) w.send({ op: "partitions", name, count });
      return started;
    };

    const ownedBy = (members: readonly LockWorker[], name: string) =>
      Promise.all(
        members.map(async (w) => {
          const e = await w.request({ op: "owned", name }, (x) => x.event === "owned");
          return (e as Owned).partitions;
        }),
      );

    it(
      "2 instances own 2 and 2 of 4 partitions; after a SIGKILL the survivor owns all 4 within TTL plus slack",
      async () => {
        const name = ctx.name("partitions");
        const count = 4;
        const ttl = ctx.target.ttlMs;
        const members = await start(2, name, count);
        const startedAt = performance.now();
        // Generous: the second instance waits for the first to see it and hand over its share.
        const balanced = await pollUntil(
          "2 instances own 2 partitions each",
          ttl * 20 + 30_000,
          () => ownedBy(members, name),
          (owned) =>
            owned.every((list) => list.length === 2) &&
            ownersPerPartition(owned, count).every((n) => n === 1),
        );
        const balanceMs = performance.now() - startedAt;

        // Steady: the same split at every check over a TTL and a half, one owner per partition,
        // and each instance's onAssigned/onRevoked calls add up to what owned() says.
        for (let check = 0; check < 3; check++) {
          await delay(ttl / 2);
          const owned = await ownedBy(members, name);
          expect(owned).toEqual(balanced);
          expect(ownersPerPartition(owned, count)).toEqual([1, 1, 1, 1]);
          expect(members.map((w) => ownedFromEvents(w, name))).toEqual(owned);
        }

        const [victim, survivor] = members as [LockWorker, LockWorker];
        const victimOwned = balanced[0] as number[];
        const victimTokens = victimOwned.map((p) => lastToken(victim, name, p));
        const killedAt = performance.now();
        await victim.kill();
        const bound = ttl * 3 + 10_000;
        await pollUntil(
          "the survivor owns all 4 partitions",
          bound,
          () => ownedBy([survivor], name),
          ([owned]) => owned?.length === count,
        );
        const failoverMs = performance.now() - killedAt;
        console.log(
          `[baton conformance] ${ctx.target.name}: partitions balanced 2/2 after ${balanceMs.toFixed(0)} ms; survivor owns all ${count} ${failoverMs.toFixed(0)} ms after SIGKILL (TTL ${ttl} ms)`,
        );
        expect(failoverMs).toBeLessThan(bound);
        // The survivor's tokens for the dead instance's partitions are greater than the dead one's.
        for (const [i, p] of victimOwned.entries()) {
          const before = victimTokens[i] as bigint;
          expect(lastToken(survivor, name, p)).toBeGreaterThan(before);
        }
        // And it keeps them.
        await delay(ttl);
        expect(await ownedBy([survivor], name)).toEqual([[0, 1, 2, 3]]);
        expect(ownedFromEvents(survivor, name)).toEqual([0, 1, 2, 3]);
      },
      ctx.target.ttlMs * 30 + 60_000,
    );
  });
}
