import {
  ConfigError,
  createCoordinator,
  LockLostError,
  MemoryFence,
  type RunContext,
  RunTimeoutError,
  StaleTokenError,
} from "@baton/core";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { skipUnless } from "../skip-unless.js";
import { delay, type SuiteContext } from "../suite-context.js";

type JobEvent = Extract<WorkerEvent, { event: "job-started" | "job-wrote" | "job-result" }>;
type JobResult = Extract<WorkerEvent, { event: "job-result" }>;

const SLOT = "2026-12-01T02:00:00Z";

/**
 * `coordinator.runOnce` and `coordinator.schedule`: a slot runs once across replicas and is
 * recorded durably beside its lock. In-process replicas first, then replicas in worker
 * processes (clocks seconds apart, SIGKILL mid-run, SIGSTOP past the TTL and `atMostMs`),
 * whose writes go through a fence kept here, to count what each slot did. A backend whose
 * sessions keep no records (`readRecord` / `writeRecord`) cannot serve `runOnce`: there only
 * the test that says so runs, and every other one is skipped with the reason printed.
 *
 * `workersSkip` says why the worker-process tests cannot run (not cross-process, no URL).
 */
export function runOnceGroup(
  ctx: SuiteContext,
  url: () => string,
  workersSkip: string | undefined,
): void {
  describe("runOnce and schedule", () => {
    let records: boolean | undefined;
    const noRecords = () =>
      `${ctx.target.name} keeps no durable records (no readRecord/writeRecord)`;
    beforeAll(async () => {
      records = await keepsRecords(ctx);
      if (!records) {
        console.warn(
          `[baton conformance] SKIPPED by declared guarantees: ${noRecords()}; runOnce and schedule refuse it`,
        );
      }
    });
    const withRecords = itWithRecords(() => records === true, noRecords);
    const ttl = ctx.target.ttlMs;
    const fenced = () => ctx.backend.guarantees.fencing !== "none";

    it("a backend without records refuses runOnce with a ConfigError that says so", async ({
      skip,
    }) => {
      if (records === true) skip(`${ctx.target.name} keeps records`);
      const a = ctx.coordinator();
      let ran = false;
      const error = await a
        .runOnce(ctx.name("job"), SLOT, () => {
          ran = true;
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/keeps no durable records/);
      expect(ran).toBe(false);
    });

    withRecords(
      "runs a slot once; another coordinator's call skips it as already done",
      async () => {
        const a = ctx.coordinator({ ownerId: "replica-a" });
        const b = ctx.coordinator({ ownerId: "replica-b" });
        const job = ctx.name("job");
        let runs = 0;
        const first = await a.runOnce(job, SLOT, (run: RunContext) => {
          runs++;
          return { slot: run.slot, attempt: run.attempt, job: run.job };
        });
        expect(first).toMatchObject({ outcome: "ran", attempt: 1, value: { slot: SLOT, job } });
        const again = await b.runOnce(job, SLOT, () => {
          runs++;
        });
        expect(again).toMatchObject({
          outcome: "already-done",
          record: { state: "done", attempt: 1, holder: "replica-a" },
        });
        if (fenced() && first.outcome === "ran" && again.outcome === "already-done") {
          expect(again.record.token).toBe(first.token);
        }
        expect(runs).toBe(1);
        // Another slot of the same job is a slot of its own.
        expect((await b.runOnce(job, "2026-12-02T02:00:00Z", () => runs++)).outcome).toBe("ran");
        expect(runs).toBe(2);
      },
    );

    withRecords("a done slot stays done after its lock's lease has long expired", async () => {
      const job = ctx.name("job");
      const a = ctx.coordinator();
      expect((await a.runOnce(job, SLOT, () => "billed")).outcome).toBe("ran");
      await a.close();
      await delay(ttl * 3);
      const b = ctx.coordinator();
      const later = await b.runOnce(job, SLOT, () => {
        throw new Error("a done slot ran again");
      });
      expect(later).toMatchObject({ outcome: "already-done", record: { state: "done" } });
    });

    withRecords(
      "while one replica runs the slot, a call without waitMs skips it as running elsewhere",
      async () => {
        const a = ctx.coordinator({ ownerId: "replica-a" });
        const b = ctx.coordinator({ ownerId: "replica-b" });
        const job = ctx.name("job");
        const gate = opened();
        const running = a.runOnce(job, SLOT, async () => {
          gate.started();
          await gate.closed;
        });
        await gate.running;
        let ranOnB = false;
        const skipped = await b.runOnce(job, SLOT, () => {
          ranOnB = true;
        });
        expect(skipped.outcome).toBe("running-elsewhere");
        expect(skipped.outcome === "running-elsewhere" && skipped.holder?.ownerId).toBe(
          "replica-a",
        );
        gate.open();
        expect((await running).outcome).toBe("ran");
        expect(ranOnB).toBe(false);
      },
    );

    withRecords(
      "a replica that waits while another runs the slot learns it is done, without running it",
      async () => {
        const a = ctx.coordinator({ ownerId: "replica-a" });
        const b = ctx.coordinator({ ownerId: "replica-b" });
        const job = ctx.name("job");
        const gate = opened();
        const running = a.runOnce(job, SLOT, async () => {
          gate.started();
          await gate.closed;
        });
        await gate.running;
        let ranOnB = false;
        const waiting = b.runOnce(
          job,
          SLOT,
          () => {
            ranOnB = true;
          },
          { waitMs: ttl * 4 + 10_000 },
        );
        await delay(Math.min(ttl, 500)); // b is waiting on the slot's lock
        gate.open();
        expect((await running).outcome).toBe("ran");
        expect(await waiting).toMatchObject({
          outcome: "already-done",
          record: { state: "done", holder: "replica-a" },
        });
        expect(ranOnB).toBe(false);
      },
    );

    withRecords(
      "a failing job is retried by the next call, up to maxAttempts, then skipped as exhausted",
      async () => {
        const a = ctx.coordinator();
        const b = ctx.coordinator();
        const job = ctx.name("job");
        const fail = () => {
          throw new Error("payment API down");
        };
        const options = { maxAttempts: 2 };
        const first = await a.runOnce(job, SLOT, fail, options);
        const second = await b.runOnce(job, SLOT, fail, options);
        let ranThird = false;
        const third = await a.runOnce(
          job,
          SLOT,
          () => {
            ranThird = true;
          },
          options,
        );
        expect(first).toMatchObject({ outcome: "failed", attempt: 1, attemptsLeft: 1 });
        expect(second).toMatchObject({ outcome: "failed", attempt: 2, attemptsLeft: 0 });
        expect(first.outcome === "failed" && (first.error as Error).message).toBe(
          "payment API down",
        );
        expect(third).toMatchObject({
          outcome: "attempts-exhausted",
          record: { state: "failed", attempt: 2, error: "payment API down" },
        });
        expect(ranThird).toBe(false);
        if (fenced() && first.outcome === "failed" && second.outcome === "failed") {
          expect(second.token > first.token).toBe(true);
        }
      },
    );

    withRecords(
      "a run past atMostMs has its signal aborted with RunTimeoutError and its lock released",
      async () => {
        const a = ctx.coordinator();
        const b = ctx.coordinator();
        const job = ctx.name("job");
        let reason: unknown;
        const result = await a.runOnce(
          job,
          SLOT,
          ({ signal }) =>
            new Promise<never>(() => {
              signal.addEventListener("abort", () => {
                reason = signal.reason;
              });
            }),
          { atMostMs: 200 },
        );
        expect(reason).toBeInstanceOf(RunTimeoutError);
        expect(result).toMatchObject({ outcome: "failed", attempt: 1, attemptsLeft: 2 });
        expect(result.outcome === "failed" && result.error).toBeInstanceOf(RunTimeoutError);
        // a is alive and would renew a lock it kept: b runs the retry at once, not after a TTL.
        const retry = await b.runOnce(job, SLOT, ({ attempt }) => attempt);
        expect(retry).toMatchObject({ outcome: "ran", attempt: 2, value: 2 });
      },
    );

    withRecords(
      "a replica frozen past its TTL mid-run resolves failed with LockLostError; the next runs attempt 2",
      async () => {
        const a = ctx.coordinator({ ownerId: "replica-a" });
        const b = ctx.coordinator({ ownerId: "replica-b" });
        const job = ctx.name("job");
        const frozen = await a.runOnce(job, SLOT, async () => {
          // The event loop stops, as in a long GC pause: the lock and its session lapse.
          const until = performance.now() + ttl * 3;
          while (performance.now() < until) {
            // frozen
          }
          await delay(10);
          return "late";
        });
        expect(frozen).toMatchObject({ outcome: "failed", attempt: 1 });
        expect(frozen.outcome === "failed" && frozen.error).toBeInstanceOf(LockLostError);
        const next = await b.runOnce(job, SLOT, ({ attempt }) => attempt, {
          waitMs: ttl * 4 + 10_000,
        });
        expect(next).toMatchObject({ outcome: "ran", attempt: 2, value: 2 });
      },
    );

    withRecords(
      "a job paused past its TTL inside fn sees its signal aborted at its first check on waking, is not recorded ran, and the slot completes once",
      async () => {
        const a = ctx.coordinator({ ownerId: "replica-a" });
        const b = ctx.coordinator({ ownerId: "replica-b" });
        const job = ctx.name("paused");
        /** Attempts that went on to their write, as a job checking its signal before it does. */
        const completed: string[] = [];
        const firstCheck: { aborted?: boolean; reason?: unknown } = {};
        // fn is not awaited once its signal aborts: the test waits for its first check.
        let checked: () => void = () => undefined;
        const hasChecked = new Promise<void>((resolve) => {
          checked = resolve;
        });
        const paused = await a.runOnce(job, SLOT, async (run: RunContext) => {
          await delay(1);
          // The event loop stops, as in a SIGSTOP or a long GC pause, past the lease; the job
          // checks its signal on waking, before any timer (Baton's included) has run.
          const until = performance.now() + ttl * 3;
          while (performance.now() < until) {
            // paused
          }
          firstCheck.aborted = run.signal.aborted;
          firstCheck.reason = run.signal.reason;
          if (!run.signal.aborted) completed.push(`replica-a@${run.token}`);
          checked();
          return "late";
        });
        await hasChecked;
        expect(firstCheck.aborted).toBe(true);
        expect(firstCheck.reason).toBeInstanceOf(LockLostError);
        expect(paused).toMatchObject({ outcome: "failed", attempt: 1 });
        const next = await b.runOnce(
          job,
          SLOT,
          (run: RunContext) => {
            run.signal.throwIfAborted();
            completed.push(`replica-b@${run.token}`);
            return run.attempt;
          },
          { waitMs: ttl * 4 + 10_000 },
        );
        expect(next).toMatchObject({ outcome: "ran", attempt: 2, value: 2 });
        expect(completed).toHaveLength(1);
        const audit = await a.runOnce(job, SLOT, () => {
          throw new Error("a done slot ran again");
        });
        expect(audit).toMatchObject({
          outcome: "already-done",
          record: { state: "done", attempt: 2, holder: "replica-b" },
        });
      },
      120_000,
    );

    withRecords(
      "a job paused past atMostMs inside fn sees its signal aborted with RunTimeoutError at its first check, and is recorded failed",
      async () => {
        const a = ctx.coordinator();
        const job = ctx.name("overran");
        const atMostMs = Math.max(50, Math.floor(ttl / 4));
        let aborted: boolean | undefined;
        let reason: unknown;
        let checked: () => void = () => undefined;
        const hasChecked = new Promise<void>((resolve) => {
          checked = resolve;
        });
        const result = await a.runOnce(
          job,
          SLOT,
          async (run: RunContext) => {
            await delay(1);
            const until = performance.now() + atMostMs * 2;
            while (performance.now() < until) {
              // paused, within the lease
            }
            aborted = run.signal.aborted;
            reason = run.signal.reason;
            checked();
            return "late";
          },
          { atMostMs },
        );
        await hasChecked;
        expect(aborted).toBe(true);
        expect(reason).toBeInstanceOf(RunTimeoutError);
        expect(result).toMatchObject({ outcome: "failed", attempt: 1 });
        expect(await a.runOnce(job, SLOT, ({ attempt }) => attempt)).toMatchObject({
          outcome: "ran",
          value: 2,
        });
      },
    );

    withRecords(
      "records: compare-and-set on the session, kept apart from locks, surviving the session",
      async () => {
        const key = ctx.name("record");
        const s1 = await ctx.session();
        const read = (s: typeof s1) =>
          (s.readRecord as NonNullable<typeof s.readRecord>).call(s, key);
        const write = (s: typeof s1, value: string, expected: string | null) =>
          (s.writeRecord as NonNullable<typeof s.writeRecord>).call(s, key, value, expected);
        expect(await read(s1)).toBeNull();
        const v1 = await write(s1, "one", null);
        expect(typeof v1).toBe("string");
        expect(await read(s1)).toEqual({ value: "one", version: v1 });
        // Expected "no record" while there is one: refused, nothing written.
        expect(await write(s1, "not-first", null)).toBeNull();
        const v2 = await write(s1, "two", v1);
        expect(typeof v2).toBe("string");
        expect(v2).not.toBe(v1);
        // A stale version: refused, nothing written.
        expect(await write(s1, "stale", v1)).toBeNull();
        expect(await read(s1)).toEqual({ value: "two", version: v2 });
        // Writers racing from one version: exactly one wins.
        const racers = await Promise.all([ctx.session(), ctx.session(), ctx.session()]);
        const raced = await Promise.all(racers.map((s, i) => write(s, `racer-${i}`, v2)));
        const winners = raced.filter((v) => v !== null);
        expect(winners).toHaveLength(1);
        const won = raced.findIndex((v) => v !== null);
        expect(await read(s1)).toEqual({ value: `racer-${won}`, version: winners[0] });
        // A lock of the same name is another key: taking and releasing it leaves the record.
        const grant = await s1.acquire(key, { wait: false, signal: new AbortController().signal });
        expect(grant).not.toBeNull();
        if (grant !== null) expect(await s1.release(grant)).toBe(true);
        await s1.close();
        await delay(ttl * 2);
        const s2 = await ctx.session();
        expect(await read(s2)).toEqual({ value: `racer-${won}`, version: winners[0] });
        expect(typeof (await write(s2, "three", winners[0] ?? null))).toBe("string");
      },
    );

    skipUnless(workersSkip === undefined, workersSkip ?? "", () =>
      workerTests(ctx, url, () => records === true, noRecords),
    );
  });
}

/** Registers tests that need records: each is skipped, with `why`, on a backend without. */
function itWithRecords(records: () => boolean, why: () => string) {
  return (title: string, test: () => Promise<void>, timeoutMs?: number) =>
    it(
      title,
      async ({ skip }) => {
        if (!records()) skip(why());
        await test();
      },
      timeoutMs,
    );
}

/**
 * Whether the backend's sessions keep records, as its guarantees declare; a backend with half
 * of the pair, or whose sessions disagree with its declaration, is wrong.
 */
async function keepsRecords(ctx: SuiteContext): Promise<boolean> {
  const session = await ctx.backend.openSession({ ttlMs: ctx.target.ttlMs * 10, ownerId: "probe" });
  try {
    const read = typeof session.readRecord === "function";
    const write = typeof session.writeRecord === "function";
    if (read !== write) {
      throw new Error(
        `conformance: ${ctx.target.name} sessions have ${read ? "readRecord" : "writeRecord"} without ${read ? "writeRecord" : "readRecord"}: implement both or neither`,
      );
    }
    if (read !== ctx.backend.guarantees.records) {
      throw new Error(
        `conformance: ${ctx.target.name} declares records: ${ctx.backend.guarantees.records}, but its sessions ${read ? "have" : "lack"} readRecord/writeRecord`,
      );
    }
    return read;
  } finally {
    await session.close();
  }
}

/** A job that reports when it runs and waits until the test opens the gate. */
function opened() {
  let started: () => void = () => undefined;
  let open: () => void = () => undefined;
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const closed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { running, closed, started: () => started(), open: () => open() };
}

function workerTests(
  ctx: SuiteContext,
  url: () => string,
  hasRecords: () => boolean,
  noRecords: () => string,
): void {
  describe("worker processes", () => {
    const workers: LockWorker[] = [];
    const cleanups: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
      for (const f of cleanups.splice(0)) await f().catch(() => undefined);
    });
    const ttl = ctx.target.ttlMs;
    /** Long enough for a dead or frozen holder's lease to run out and a waiter to notice. */
    const takeoverBound = ttl * 4 + 10_000;

    const replicas = async (count: number, label: string) => {
      const started = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          spawnLockWorker({ url: url(), ttlMs: ttl, ownerId: `${label}-${i}` }),
        ),
      );
      workers.push(...started);
      return started;
    };

    /**
     * What the workers' jobs wrote, through one fence per slot kept here: a slot run twice
     * writes twice, and the second write, with a later token, is accepted too, so a count of
     * accepted writes above one is a double run; a write with an older token is rejected.
     */
    const fenceFor = (replicaSet: LockWorker[], job: string) => {
      const fence = new MemoryFence();
      const accepted = new Map<string, string[]>();
      const rejected: string[] = [];
      const decisions: Promise<unknown>[] = [];
      for (const [i, w] of replicaSet.entries()) {
        const stop = w.onEvent((e) => {
          if (e.event !== "job-wrote" || e.job !== job) return;
          const who = `${i}@${e.token}`;
          decisions.push(
            fence
              .write(e.slot, BigInt(e.token), () => {
                accepted.set(e.slot, [...(accepted.get(e.slot) ?? []), who]);
              })
              .catch((error: unknown) => {
                if (!(error instanceof StaleTokenError)) throw error;
                rejected.push(`${e.slot} ${who}`);
              }),
          );
        });
        cleanups.push(async () => stop());
      }
      return { accepted, rejected, settled: () => Promise.all(decisions) };
    };

    /** The record of `job`'s slot as a fresh replica sees it: it must not run the slot. */
    const recordOf = async (job: string, slot: string) => {
      const c = createCoordinator({ url: url(), ttlMs: ttl, ownerId: "auditor" });
      cleanups.push(() => c.close());
      return await c.runOnce(job, slot, () => {
        throw new Error(`slot ${slot} of ${job} ran again`);
      });
    };

    const results = (w: LockWorker, job: string) =>
      w.events.filter((e): e is JobResult => e.event === "job-result" && e.job === job);
    const isJob =
      <K extends JobEvent["event"]>(kind: K, job: string) =>
      (e: WorkerEvent): e is Extract<JobEvent, { event: K }> =>
        e.event === kind && (e as JobEvent).job === job;
    const describeEvents = (set: LockWorker[], job: string) =>
      set
        .map(
          (w, i) =>
            `worker ${i}: ${JSON.stringify(w.events.filter((e) => ("job" in e && e.job === job) || e.event === "error"))}`,
        )
        .join("\n");

    const withRecords = itWithRecords(hasRecords, noRecords);

    withRecords(
      "3 replicas schedule one job every second, clocks seconds apart: each slot is done exactly once",
      async () => {
        const job = ctx.name("cron");
        const set = await replicas(3, "cron");
        // Each replica runs a slot of another job first: the adapter's import and the first
        // session (seconds on a busy machine) happen before the schedule, not in its window.
        const warm = `${job}-warm-up`;
        await Promise.all(
          set.map((w, i) =>
            w.request(
              { op: "run-once", job: warm, slot: `replica-${i}`, holdMs: 0 },
              isJob("job-result", warm),
              60_000,
            ),
          ),
        );
        const fence = fenceFor(set, job);
        // Each replica's wall clock is off by seconds, so its timer fires at its own "tick".
        const skews = [0, 2_300, -1_600];
        const startedAt = Date.now();
        for (const [i, w] of set.entries()) {
          w.send({ op: "schedule", job, cron: "* * * * * *", holdMs: 300, clockSkewMs: skews[i] });
        }
        await delay(12_000);
        const stoppingAt = Date.now();
        await Promise.all(
          set.map((w) =>
            w.request(
              { op: "stop-schedule", job },
              (e) => e.event === "schedule-stopped" && e.job === job,
            ),
          ),
        );
        await fence.settled();
        const all = set.flatMap((w) => results(w, job));
        const detail = `events:\n${describeEvents(set, job)}`;
        const ran = new Map<string, number>();
        for (const r of all) if (r.outcome === "ran") ran.set(r.slot, (ran.get(r.slot) ?? 0) + 1);
        // Never twice: no slot ran, or wrote, twice.
        for (const [slot, n] of ran) expect(n, `slot ${slot} ran ${n} times; ${detail}`).toBe(1);
        for (const [slot, writers] of fence.accepted) {
          expect(writers, `slot ${slot}; ${detail}`).toHaveLength(1);
        }
        expect(fence.rejected, detail).toEqual([]);
        // Never zero times: every tick that every replica's timer passed while scheduling.
        const expected: string[] = [];
        const from = Math.ceil((startedAt + Math.max(...skews) + 1_000) / 1_000) * 1_000;
        const to = stoppingAt + Math.min(...skews) - 1_000;
        for (let t = from; t <= to; t += 1_000)
          expected.push(new Date(t).toISOString().replace(".000Z", "Z"));
        expect(expected.length).toBeGreaterThanOrEqual(4);
        // Slots of the window ran or were found done; a run under way at stop() is aborted.
        expect(
          all.filter(
            (r) => expected.includes(r.slot) && r.outcome !== "ran" && r.outcome !== "already-done",
          ),
          detail,
        ).toEqual([]);
        for (const slot of expected) {
          expect(ran.get(slot), `slot ${slot} never ran; ${detail}`).toBe(1);
          expect(fence.accepted.get(slot), `slot ${slot}; ${detail}`).toHaveLength(1);
        }
        // The replicas that fired later found the slots done: the lock alone would rerun them.
        expect(all.filter((r) => r.outcome === "already-done").length).toBeGreaterThan(0);
        console.info(
          `[baton runOnce] ${ctx.target.name}: ${expected.length} slots checked, ${ran.size} ran in all, by replica: ${set
            .map((w) => results(w, job).filter((r) => r.outcome === "ran").length)
            .join("/")}`,
        );
      },
      120_000,
    );

    withRecords(
      "SIGKILL mid-run: a replica waiting on the slot runs it as attempt 2, and the slot ends done once",
      async () => {
        const job = ctx.name("killed");
        const [first, ...waiting] = (await replicas(3, "kill")) as [LockWorker, ...LockWorker[]];
        const set = [first, ...waiting];
        const fence = fenceFor(set, job);
        first.send({ op: "run-once", job, slot: SLOT, holdMs: 600_000 });
        const started = await first.waitFor(isJob("job-started", job), 20_000);
        expect(started.attempt).toBe(1);
        for (const w of waiting) {
          w.send({ op: "run-once", job, slot: SLOT, holdMs: 300, waitMs: takeoverBound + 30_000 });
        }
        await delay(Math.min(ttl, 1_000)); // both wait on the slot's lock
        const killedAt = performance.now();
        await first.kill();
        const retry = await Promise.any(
          waiting.map((w) => w.waitFor(isJob("job-started", job), takeoverBound)),
        );
        const takeoverMs = performance.now() - killedAt;
        expect(retry.attempt).toBe(2);
        if (ctx.backend.guarantees.fencing !== "none") {
          expect(BigInt(retry.token) > BigInt(started.token)).toBe(true);
        }
        const outcomes = await Promise.all(
          waiting.map((w) => w.waitFor(isJob("job-result", job), takeoverBound)),
        );
        await fence.settled();
        const detail = `events:\n${describeEvents(set, job)}`;
        expect(outcomes.map((r) => r.outcome).sort(), detail).toEqual(["already-done", "ran"]);
        expect(outcomes.find((r) => r.outcome === "ran")?.attempt).toBe(2);
        expect(outcomes.find((r) => r.outcome === "already-done")?.attempt).toBe(2);
        expect(fence.accepted.get(SLOT), detail).toHaveLength(1);
        expect(await recordOf(job, SLOT)).toMatchObject({
          outcome: "already-done",
          record: { state: "done", attempt: 2 },
        });
        console.info(
          `[baton runOnce] ${ctx.target.name}: attempt 2 started ${Math.round(takeoverMs)} ms after the SIGKILL (TTL ${ttl} ms)`,
        );
      },
      120_000,
    );

    withRecords(
      "SIGSTOP past the TTL and atMostMs: another replica takes over, the late write is fenced off, the slot is done once",
      async () => {
        const job = ctx.name("stopped");
        const [stopped, next] = (await replicas(2, "stop")) as [LockWorker, LockWorker];
        const fence = fenceFor([stopped, next], job);
        // The job sleeps past the lock's deadline, atMostMs past the job: on SIGCONT the lock
        // is lost first, then the job wakes and writes with its old token.
        const holdMs = ttl * 2;
        const atMostMs = ttl * 3 + 1_000;
        stopped.send({ op: "run-once", job, slot: SLOT, holdMs, atMostMs });
        const started = await stopped.waitFor(isJob("job-started", job), 20_000);
        stopped.pause();
        const pausedAt = performance.now();
        next.send({
          op: "run-once",
          job,
          slot: SLOT,
          holdMs,
          atMostMs,
          waitMs: takeoverBound + 30_000,
        });
        const took = await next.waitFor(isJob("job-started", job), takeoverBound);
        expect(took.attempt).toBe(2);
        expect(BigInt(took.token) > BigInt(started.token)).toBe(true);
        const done = await next.waitFor(isJob("job-result", job), takeoverBound + holdMs);
        expect(done).toMatchObject({ outcome: "ran", attempt: 2 });
        // Frozen past atMostMs too, counted from when its job started.
        await delay(Math.max(0, pausedAt + atMostMs + 1_000 - performance.now()));
        const from = stopped.events.length;
        stopped.resume();
        const late = await stopped.waitFor(isJob("job-wrote", job), 20_000, from);
        const result = await stopped.waitFor(isJob("job-result", job), 20_000, from);
        await fence.settled();
        const detail = `events:\n${describeEvents([stopped, next], job)}`;
        expect(late.token).toBe(started.token);
        expect(fence.rejected, detail).toEqual([`${SLOT} 0@${started.token}`]);
        expect(fence.accepted.get(SLOT), detail).toEqual([`1@${took.token}`]);
        expect(result, detail).toMatchObject({
          outcome: "failed",
          attempt: 1,
          error: "LockLostError",
        });
        expect(await recordOf(job, SLOT)).toMatchObject({
          outcome: "already-done",
          record: { state: "done", attempt: 2, holder: "stop-1" },
        });
      },
      120_000,
    );
  });
}
