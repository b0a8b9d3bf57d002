import { afterEach, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { type PrometheusSample, parsePrometheusText, sumSamples } from "../prometheus-text.js";
import { delay, type SuiteContext } from "../suite-context.js";
import { nextLeader } from "../worker-candidates.js";

type Metrics = Extract<WorkerEvent, { event: "metrics" }>;

/**
 * `enablePrometheus()` in every candidate's process, each with its own registry: scraped
 * and summed over the candidates, `baton_is_leader` is 1, before and after a failover.
 */
export function metricsGroup(ctx: SuiteContext, url: () => string): void {
  describe("Prometheus metrics (worker processes)", () => {
    const workers: LockWorker[] = [];
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
    });

    const scrape = async (w: LockWorker): Promise<PrometheusSample[]> => {
      const e = await w.request({ op: "metrics" }, (x) => x.event === "metrics");
      return parsePrometheusText((e as Metrics).text);
    };

    it(
      "3 candidates: baton_is_leader sums to 1 in steady state and again after a SIGKILL failover",
      async () => {
        const name = ctx.name("metrics");
        const ttl = ctx.target.ttlMs;
        const candidates = await Promise.all(
          Array.from({ length: 3 }, (_, i) =>
            spawnLockWorker({ url: url(), ttlMs: ttl, ownerId: `metrics-${i}` }),
          ),
        );
        workers.push(...candidates);
        // Metrics first, so the elections are watched from their start.
        await Promise.all(
          candidates.map((w) =>
            w.request({ op: "enable-metrics" }, (e) => e.event === "metrics-enabled"),
          ),
        );
        for (const w of candidates) w.send({ op: "elect", name });
        const isLeader = (samples: PrometheusSample[]) =>
          sumSamples(samples, "baton_is_leader", { name });
        const changes = (samples: PrometheusSample[]) =>
          sumSamples(samples, "baton_leader_changes_total", { name });

        const first = await nextLeader(candidates, 0n, 30_000);
        await delay(ttl * 1.5); // steady state: a renewal or two
        const before = await Promise.all(candidates.map(scrape));
        expect(before.map(isLeader)).toEqual(candidates.map((w) => (w === first.worker ? 1 : 0)));
        expect(before.reduce((sum, s) => sum + isLeader(s), 0)).toBe(1);
        expect(before.map(changes)).toEqual(candidates.map((w) => (w === first.worker ? 1 : 0)));

        await first.worker.kill();
        const rest = candidates.filter((w) => w !== first.worker);
        const next = await nextLeader(rest, first.term, ttl * 3 + 10_000);
        await delay(ttl); // a renewal on the new leader
        const after = await Promise.all(rest.map(scrape));
        expect(after.map(isLeader)).toEqual(rest.map((w) => (w === next.worker ? 1 : 0)));
        expect(after.reduce((sum, s) => sum + isLeader(s), 0)).toBe(1);
        expect(
          changes(after[rest.indexOf(next.worker)] as PrometheusSample[]),
        ).toBeGreaterThanOrEqual(1);
        // Every survivor's watch of the election saw the failover.
        for (const samples of after)
          expect(
            sumSamples(samples, "baton_failover_seconds_count", { name }),
          ).toBeGreaterThanOrEqual(1);
      },
      ctx.target.ttlMs * 10 + 60_000,
    );
  });
}
