import { MemoryFence, StaleTokenError } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { delay, type SuiteContext } from "../suite-context.js";
import { isElected, nextLeader, pollUntil } from "../worker-candidates.js";

type Observed = Extract<WorkerEvent, { event: "observed" }>;

/** The leader a worker's `observe()` reported last (`owner@term`, or null), undefined if none yet. */
function latestObserved(worker: LockWorker, name: string): string | null | undefined {
  const seen = worker.events.filter(
    (e): e is Observed => e.event === "observed" && e.name === name,
  );
  return seen.at(-1)?.leader;
}

/**
 * Leader election with every candidate in its own process, so SIGKILL, SIGSTOP and SIGTERM
 * hit the process that holds the session.
 */
export function electionGroup(ctx: SuiteContext, url: () => string): void {
  describe("leader election (worker processes)", () => {
    const workers: LockWorker[] = [];
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
    });

    const start = async (count: number, name: string, options: { stepDown?: boolean } = {}) => {
      const started = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          spawnLockWorker({
            url: url(),
            ttlMs: ctx.target.ttlMs,
            ownerId: `candidate-${i}`,
            ...options,
          }),
        ),
      );
      workers.push(...started);
      for (const [i, w] of started.entries())
        w.send({ op: "elect", name, value: `candidate-${i}` });
      return started;
    };

    const leaderViews = async (candidates: LockWorker[], name: string) =>
      Promise.all(
        candidates.map(async (w) => {
          const e = await w.request({ op: "leader", name }, (x) => x.event === "leader");
          return e as Extract<WorkerEvent, { event: "leader" }>;
        }),
      );

    it("5 candidates: exactly one leader, and every candidate's leader() names it", async () => {
      const name = ctx.name("election");
      const candidates = await start(5, name);
      const first = await nextLeader(candidates, 0n, 30_000);
      await new Promise((r) => setTimeout(r, ctx.target.ttlMs * 1.5)); // through renewals
      const views = await leaderViews(candidates, name);
      expect(views.filter((v) => v.isLeader)).toHaveLength(1);
      const expected = `${views.find((v) => v.isLeader)?.term}`;
      expect(expected).toBe(`${first.term}`);
      for (const v of views) expect(v.leader?.endsWith(`@${expected}`)).toBe(true);
      expect(candidates.flatMap((w) => w.events.filter(isElected))).toHaveLength(1);
    });

    it("SIGKILL of the leader: a new leader with a greater term within TTL plus slack", async () => {
      const name = ctx.name("election-kill");
      const candidates = await start(3, name);
      const first = await nextLeader(candidates, 0n, 30_000);
      const killedAt = performance.now();
      await first.worker.kill();
      const rest = candidates.filter((w) => w !== first.worker);
      const next = await nextLeader(rest, first.term, ctx.target.ttlMs * 3 + 10_000);
      expect(next.term).toBeGreaterThan(first.term);
      expect(performance.now() - killedAt).toBeLessThan(ctx.target.ttlMs * 3 + 10_000);
    });

    it("SIGSTOP of the leader: replaced within TTL plus slack; on SIGCONT it writes nothing the fence accepts", async () => {
      const name = ctx.name("election-stop");
      const candidates = await start(2, name);
      const first = await nextLeader(candidates, 0n, 30_000);
      const fence = new MemoryFence();
      const accepted: string[] = [];
      let rejected = 0;
      const applyWrites = async (from: LockWorker, fromIndex: number) => {
        for (const e of from.events.slice(fromIndex)) {
          if (e.event !== "wrote") continue;
          try {
            await fence.write(name, BigInt(e.token), () => accepted.push(`${e.token}:${e.seq}`));
          } catch (error) {
            if (error instanceof StaleTokenError) rejected++;
            else throw error;
          }
        }
      };
      first.worker.send({ op: "tick", name, everyMs: 25 });
      await first.worker.waitFor((e) => e.event === "wrote" && e.seq >= 2, 10_000);
      first.worker.pause();
      const frozenAt = first.worker.events.length;
      const other = candidates.find((w) => w !== first.worker) as LockWorker;
      const next = await nextLeader([other], first.term, ctx.target.ttlMs * 3 + 10_000);
      // The new leader raises the fence with its term before anything else.
      await fence.raise(name, next.term);
      first.worker.resume();
      await first.worker.waitFor(
        (e) => e.event === "refused" || e.event === "revoked",
        10_000,
        frozenAt,
      );
      await new Promise((r) => setTimeout(r, 200));
      const before = accepted.length;
      await applyWrites(first.worker, frozenAt);
      expect(accepted.length).toBe(before); // nothing the old leader wrote after waking was accepted
      const lateWrites = first.worker.events.slice(frozenAt).filter((e) => e.event === "wrote");
      expect(rejected).toBe(lateWrites.length);
    });

    it("SIGTERM with step-down: a follower takes over well within one TTL", async () => {
      const name = ctx.name("election-term");
      const candidates = await start(2, name, { stepDown: true });
      const first = await nextLeader(candidates, 0n, 30_000);
      const other = candidates.find((w) => w !== first.worker) as LockWorker;
      const sentAt = performance.now();
      first.worker.terminate();
      const next = await nextLeader([other], first.term, ctx.target.ttlMs * 3 + 10_000);
      const takeoverMs = performance.now() - sentAt;
      console.log(
        `[baton conformance] ${ctx.target.name}: step-down takeover ${takeoverMs.toFixed(0)} ms (TTL ${ctx.target.ttlMs} ms)`,
      );
      expect(next.term).toBeGreaterThan(first.term);
      expect(takeoverMs).toBeLessThan(Math.max(ctx.target.ttlMs, 1_500));
    });

    it("resign() hands over to the other candidate", async () => {
      const name = ctx.name("election-resign");
      const candidates = await start(2, name);
      const first = await nextLeader(candidates, 0n, 30_000);
      const other = candidates.find((w) => w !== first.worker) as LockWorker;
      await first.worker.request({ op: "resign", name }, (e) => e.event === "resigned");
      expect(
        first.worker.events.some((e) => e.event === "revoked" && e.reason === "resigned"),
      ).toBe(true);
      const next = await nextLeader([other], first.term, 10_000);
      expect(next.term).toBeGreaterThan(first.term);
    });

    it(
      "observe(): after the first election and after a SIGKILL failover, every candidate last observed the elected leader, as leader() names it",
      async () => {
        const name = ctx.name("election-observe");
        const candidates = await start(5, name);
        for (const w of candidates) w.send({ op: "observe", name });
        const ownerOf = (w: LockWorker) => `candidate-${candidates.indexOf(w)}`;
        const failoverMs = ctx.target.ttlMs * 3 + 10_000;

        const expectAgreement = async (alive: LockWorker[], elected: LockWorker, term: bigint) => {
          const expected = `${ownerOf(elected)}@${term}`;
          await pollUntil(
            `every live candidate observes ${expected}`,
            failoverMs,
            async () => alive.map((w) => latestObserved(w, name)),
            (seen) => seen.every((leader) => leader === expected),
          );
          const views = await leaderViews(alive, name);
          for (const v of views) expect(v.leader).toBe(expected);
          expect(views.map((v) => v.isLeader)).toEqual(alive.map((w) => w === elected));
          // The observed sequence moves forward only: terms never go back.
          for (const w of alive) {
            const terms = w.events
              .filter((e): e is Observed => e.event === "observed" && e.term !== null)
              .map((e) => BigInt(e.term as string));
            for (let i = 1; i < terms.length; i++)
              expect(terms[i]).toBeGreaterThanOrEqual(terms[i - 1] as bigint);
          }
        };

        const first = await nextLeader(candidates, 0n, 30_000);
        await expectAgreement(candidates, first.worker, first.term);
        await first.worker.kill();
        const rest = candidates.filter((w) => w !== first.worker);
        const next = await nextLeader(rest, first.term, failoverMs);
        await expectAgreement(rest, next.worker, next.term);
        // Exactly one term after the first: the survivors all saw the same failover.
        expect(rest.flatMap((w) => w.events.filter(isElected))).toHaveLength(1);
      },
      ctx.target.ttlMs * 10 + 60_000,
    );

    it(
      "close(): a closed follower never leads, a closed leader is replaced, and neither runs a callback after close resolves",
      async () => {
        const name = ctx.name("election-close");
        const candidates = await start(3, name);
        const first = await nextLeader(candidates, 0n, 30_000);
        const [follower, survivor] = candidates.filter((w) => w !== first.worker) as [
          LockWorker,
          LockWorker,
        ];
        const isClosed = (e: WorkerEvent) => e.event === "election-closed" && e.name === name;
        await follower.request({ op: "close-election", name }, isClosed);
        const followerClosedAt = follower.events.length;

        const beforeClose = first.worker.events.length;
        const sentAt = performance.now();
        await first.worker.request({ op: "close-election", name }, isClosed);
        const leaderClosedAt = first.worker.events.length;
        // The term ended (reason "closed") before close() resolved.
        const ending = first.worker.events.slice(beforeClose);
        const revokedAt = ending.findIndex(
          (e) => e.event === "revoked" && e.name === name && e.reason === "closed",
        );
        expect(revokedAt).toBeGreaterThanOrEqual(0);
        expect(revokedAt).toBeLessThan(ending.findIndex(isClosed));

        const next = await nextLeader(
          [survivor, follower],
          first.term,
          ctx.target.ttlMs * 3 + 10_000,
        );
        const takeoverMs = performance.now() - sentAt;
        console.log(
          `[baton conformance] ${ctx.target.name}: takeover after the leader's close() ${takeoverMs.toFixed(0)} ms (TTL ${ctx.target.ttlMs} ms)`,
        );
        expect(next.worker).toBe(survivor);

        await delay(ctx.target.ttlMs * 2); // through a couple of TTLs: nothing may campaign
        const late = (w: LockWorker, from: number) =>
          w.events.slice(from).filter((e) => e.event === "elected" || e.event === "revoked");
        expect(late(follower, followerClosedAt)).toEqual([]);
        expect(late(first.worker, leaderClosedAt)).toEqual([]);
        expect(follower.events.some(isElected)).toBe(false);
        const [view] = await leaderViews([survivor], name);
        expect(view?.isLeader).toBe(true);
        expect(view?.leader).toBe(`candidate-${candidates.indexOf(survivor)}@${next.term}`);
      },
      ctx.target.ttlMs * 10 + 60_000,
    );
  });
}
