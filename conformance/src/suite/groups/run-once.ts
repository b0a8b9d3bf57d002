import { ConfigError, type RunContext, RunTimeoutError } from "@baton/core";
import { beforeAll, describe, expect, it } from "vitest";
import { delay, type SuiteContext } from "../suite-context.js";

const SLOT = "2026-12-01T02:00:00Z";

/**
 * `coordinator.runOnce`: a slot runs once across replicas and is recorded durably beside its
 * lock. A backend whose sessions keep no records (`readRecord` / `writeRecord`) cannot serve
 * it: there only the test that says so runs, and every other one is skipped with the reason
 * printed.
 */
export function runOnceGroup(ctx: SuiteContext): void {
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
    /** A test that needs records: skipped, with the reason, on a backend without them. */
    const withRecords = (title: string, test: () => Promise<void>, timeoutMs?: number) =>
      it(
        title,
        async ({ skip }) => {
          if (records !== true) skip(noRecords());
          await test();
        },
        timeoutMs,
      );
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
  });
}

/** Whether the backend's sessions keep records; a backend with half of the pair is wrong. */
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
