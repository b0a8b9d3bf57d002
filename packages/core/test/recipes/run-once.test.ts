import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import {
  BackendUnavailableError,
  BatonError,
  ConfigError,
  type Coordinator,
  createCoordinator,
  enablePrometheus,
  MemoryBackend,
  MemoryStore,
  type RunOnceResult,
  ScheduleStoppedError,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";
import { wrappedMemory } from "../support/wrapped-memory.js";

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
});

/** Replicas sharing one store, as processes share one server. */
function replicas(ttlMs = 1_000): [Coordinator, Coordinator, Coordinator] {
  const store = new MemoryStore();
  const make = (i: number) => {
    const c = createCoordinator({
      backend: new MemoryBackend({ store }),
      ttlMs,
      ownerId: `replica-${i}`,
    });
    open.push(c);
    return c;
  };
  return [make(0), make(1), make(2)];
}

describe("coordinator.runOnce", () => {
  it("runs a slot once; later calls, from any replica, skip it as done", async () => {
    const [a, b] = replicas();
    let runs = 0;
    const first = await a.runOnce("invoices", "2026-12-01", ({ attempt, token, slot }) => {
      runs++;
      return { attempt, token, slot };
    });
    expect(first.outcome).toBe("ran");
    expect(first.outcome === "ran" && first.value).toMatchObject({
      attempt: 1,
      slot: "2026-12-01",
    });
    const again = await b.runOnce("invoices", "2026-12-01", () => runs++);
    expect(again.outcome).toBe("already-done");
    expect(again.outcome === "already-done" && again.record).toMatchObject({
      state: "done",
      holder: "replica-0",
      attempt: 1,
    });
    expect(runs).toBe(1);
    expect((await b.runOnce("invoices", "2026-12-02", () => runs++)).outcome).toBe("ran");
  });

  it("a slot is done for good: it does not run again after its lock's lease is long gone", async () => {
    const [a, b] = replicas(100);
    await a.runOnce("invoices", "2026-12-01", () => undefined);
    await a.close();
    await new Promise((r) => setTimeout(r, 300));
    const later = await b.runOnce("invoices", "2026-12-01", () => {
      throw new Error("must not run");
    });
    expect(later.outcome).toBe("already-done");
  });

  it("while another replica runs the slot, a call without waitMs skips it as running elsewhere", async () => {
    const [a, b] = replicas();
    let finish: () => void = () => undefined;
    const running = a.runOnce(
      "invoices",
      "2026-12-01",
      () => new Promise<void>((r) => (finish = r)),
    );
    await until(async () => (await b.holder("invoices/slot/2026-12-01")) !== null);
    const skipped = await b.runOnce("invoices", "2026-12-01", () => undefined);
    expect(skipped.outcome).toBe("running-elsewhere");
    expect(skipped.outcome === "running-elsewhere" && skipped.holder?.ownerId).toBe("replica-0");
    finish();
    expect((await running).outcome).toBe("ran");
  });

  it("a replica that waits learns the slot is done, without running it", async () => {
    const [a, b] = replicas();
    let finish: () => void = () => undefined;
    const running = a.runOnce(
      "invoices",
      "2026-12-01",
      () => new Promise<void>((r) => (finish = r)),
    );
    await until(async () => (await b.holder("invoices/slot/2026-12-01")) !== null);
    let ranOnB = false;
    const waiting = b.runOnce(
      "invoices",
      "2026-12-01",
      () => {
        ranOnB = true;
      },
      { waitMs: 10_000 },
    );
    finish();
    expect((await running).outcome).toBe("ran");
    expect((await waiting).outcome).toBe("already-done");
    expect(ranOnB).toBe(false);
  });

  it("a failed attempt is retried by the next call, up to maxAttempts, then skipped", async () => {
    const [a, b] = replicas();
    const fail = () => {
      throw new Error("payment API down");
    };
    const results: RunOnceResult<never>[] = [];
    results.push(await a.runOnce("invoices", "d", fail, { maxAttempts: 2 }));
    results.push(await b.runOnce("invoices", "d", fail, { maxAttempts: 2 }));
    results.push(await a.runOnce("invoices", "d", fail, { maxAttempts: 2 }));
    expect(results.map((r) => r.outcome)).toEqual(["failed", "failed", "attempts-exhausted"]);
    expect(results[0]).toMatchObject({ attempt: 1, attemptsLeft: 1 });
    expect(results[1]).toMatchObject({ attempt: 2, attemptsLeft: 0 });
    expect((results[0] as { error: Error }).error.message).toBe("payment API down");
    expect(results[2]).toMatchObject({ record: { state: "failed", error: "payment API down" } });
  });

  it("tokens rise from one attempt to the next", async () => {
    const [a] = replicas();
    const tokens: bigint[] = [];
    await a.runOnce("invoices", "d", ({ token }) => {
      tokens.push(token);
      throw new Error("retry me");
    });
    await a.runOnce("invoices", "d", ({ token }) => {
      tokens.push(token);
    });
    expect(tokens[1]).toBeGreaterThan(tokens[0] ?? 0n);
  });

  it("bad input is a ConfigError naming the field, before any I/O", async () => {
    const [a] = replicas();
    const fn = () => undefined;
    await expect(a.runOnce("", "d", fn)).rejects.toMatchObject({ field: "job" });
    await expect(a.runOnce("j", "", fn)).rejects.toMatchObject({ field: "slot" });
    await expect(a.runOnce("j", "d", 42 as never)).rejects.toMatchObject({ field: "fn" });
    await expect(a.runOnce("j", "d", fn, { atMostMs: 0 })).rejects.toMatchObject({
      field: "atMostMs",
    });
    await expect(a.runOnce("j", "d", fn, { maxAttempts: 0 })).rejects.toMatchObject({
      field: "maxAttempts",
    });
    await expect(a.runOnce("j", "d", fn, { atMost: 5 } as never)).rejects.toBeInstanceOf(
      ConfigError,
    );
  });

  it("a backend that keeps no records is refused with a ConfigError saying so", async () => {
    const coordinator = createCoordinator({ backend: new ScriptedBackend({ kind: "weak" }) });
    open.push(coordinator);
    const error = await coordinator.runOnce("j", "d", () => undefined).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/keeps no durable records/);
  });

  it("counts outcomes and the last success in Prometheus metrics", async () => {
    const [a] = replicas();
    const registry = new Registry();
    await enablePrometheus(a, { registry });
    await a.runOnce("invoices", "d1", () => undefined);
    await a.runOnce("invoices", "d1", () => undefined);
    const text = await registry.metrics();
    expect(text).toContain('baton_job_runs_total{job="invoices",outcome="ran"} 1');
    expect(text).toContain('baton_job_runs_total{job="invoices",outcome="already-done"} 1');
    const last = /baton_job_last_success_timestamp_seconds\{job="invoices"\} (\S+)/.exec(text);
    expect(Math.abs(Number(last?.[1]) - Date.now() / 1_000)).toBeLessThan(60);
  });
});

describe("coordinator.schedule", () => {
  it("replicas whose clocks differ by seconds run each tick once between them", async () => {
    const coordinators = replicas();
    // Each replica's wall clock is off by a few seconds; its timer fires at its own 'tick'.
    const skews = [0, 2_500, -1_700];
    const start = Date.now();
    const ran: string[] = [];
    const results: string[] = [];
    const schedules = coordinators.map((c, i) =>
      c.schedule(
        "* * * * * *",
        "heartbeat",
        ({ slot }) => {
          ran.push(slot);
        },
        {
          now: () => Date.now() + (skews[i] ?? 0),
          onResult: (result, slot) => results.push(`${slot} ${result.outcome}`),
        },
      ),
    );
    await until(() => Date.now() - start > 6_000, 20_000);
    await Promise.all(schedules.map((s) => s.stop()));
    expect(ran.length).toBeGreaterThan(2);
    expect(new Set(ran).size).toBe(ran.length);
    for (const slot of ran) expect(slot).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it("a backend that declares no records is refused when the schedule is made, not at its first tick", () => {
    const coordinator = createCoordinator({ backend: new ScriptedBackend({ kind: "weak" }) });
    open.push(coordinator);
    expect(() => coordinator.schedule("0 2 * * *", "nightly", () => undefined)).toThrow(
      /weak backend keeps no durable records/,
    );
  });

  it("a bad cron expression or time zone is a ConfigError, before anything runs", () => {
    const [a] = replicas();
    expect(() => a.schedule("not cron", "j", () => undefined)).toThrow(ConfigError);
    expect(() =>
      a.schedule("0 2 * * *", "j", () => undefined, { timezone: "Mars/Olympus" }),
    ).toThrow(/timezone/);
  });

  it("a schedule made with a signal that has already aborted never runs", async () => {
    const [a] = replicas();
    let runs = 0;
    const schedule = a.schedule("* * * * * *", "stopped", () => runs++, {
      signal: AbortSignal.abort(new Error("shutting down")),
    });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(runs).toBe(0);
    expect(schedule.nextRun()).toBeNull();
    await schedule.stop();
  });

  it("nextRun names the next tick, and stop() ends the schedule", async () => {
    const [a] = replicas();
    const schedule = a.schedule("0 2 * * *", "nightly", () => undefined, { timezone: "UTC" });
    const next = schedule.nextRun();
    await until(() => schedule.nextRun() !== null);
    expect(schedule.nextRun()?.getUTCHours()).toBe(2);
    expect(next === null || next.getUTCMinutes() === 0).toBe(true);
    await schedule.stop();
    expect(schedule.nextRun()).toBeNull();
  });
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("coordinator.schedule reports every tick", () => {
  it("a tick whose store does not answer reaches onResult as failed, not only backgroundError; the others run", async () => {
    let down = false;
    const unavailable = () => Promise.reject(new BackendUnavailableError("the store is down"));
    const store = new MemoryStore();
    const backend = wrappedMemory(
      "memory",
      (session) => ({
        readRecord: (key) => (down ? unavailable() : (session.readRecord?.(key) ?? unavailable())),
        writeRecord: (key, value, expected) =>
          down ? unavailable() : (session.writeRecord?.(key, value, expected) ?? unavailable()),
      }),
      { store },
    );
    const c = createCoordinator({ backend, ttlMs: 1_000 });
    open.push(c);
    const background: unknown[] = [];
    c.on("backgroundError", (e) => background.push(e));
    const heard: { slot: string; result: RunOnceResult<unknown> }[] = [];
    const ran: string[] = [];
    const start = Date.now();
    const schedule = c.schedule(
      "* * * * * *",
      "heartbeat",
      ({ slot }) => {
        ran.push(slot);
      },
      { onResult: (result, slot) => heard.push({ slot, result }) },
    );
    await until(() => ran.length >= 1, 10_000);
    down = true;
    await until(() => Date.now() - start > 4_500, 20_000);
    down = false;
    await until(() => ran.length >= 3 && heard.length >= 5, 20_000);
    await schedule.stop();
    const slots = heard.map((h) => Date.parse(h.slot));
    // One report per tick, in order, none missing between the first and the last.
    for (let i = 1; i < slots.length; i++) expect(slots[i]).toBe((slots[i - 1] ?? 0) + 1_000);
    const notRun = heard.filter((h) => h.result.outcome === "failed");
    expect(notRun.length).toBeGreaterThan(0);
    for (const { result } of notRun) {
      if (result.outcome !== "failed") continue;
      if (result.error instanceof ScheduleStoppedError) continue;
      expect(result.error).toBeInstanceOf(BackendUnavailableError);
      expect(result).toMatchObject({ attempt: 0, token: 0n });
    }
    expect(background.length).toBeGreaterThan(0);
  }, 60_000);

  it("stop() reports the run it interrupts as failed with a ScheduleStoppedError that has a code", async () => {
    const [a] = replicas();
    const results: RunOnceResult<unknown>[] = [];
    let reason: unknown;
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const schedule = a.schedule(
      "* * * * * *",
      "long",
      ({ signal }) =>
        new Promise<never>(() => {
          started();
          signal.addEventListener("abort", () => {
            reason = signal.reason;
          });
        }),
      { onResult: (result) => results.push(result) },
    );
    await running;
    await schedule.stop();
    expect(reason).toBeInstanceOf(ScheduleStoppedError);
    expect((reason as ScheduleStoppedError).code).toBe("BATON_SCHEDULE_STOPPED");
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ outcome: "failed", attempt: 1 });
    const error = results[0]?.outcome === "failed" ? results[0].error : undefined;
    expect(error).toBeInstanceOf(ScheduleStoppedError);
    expect(error).toBeInstanceOf(BatonError);
  });

  it("a cron expression of other than 5 or 6 fields is a ConfigError", () => {
    const [a] = replicas();
    for (const cron of ["0 0 2 * * * 2027", "2 * * *", "0 0 0 2 * * * *"]) {
      expect(() => a.schedule(cron, "j", () => undefined), cron).toThrow(ConfigError);
      expect(() => a.schedule(cron, "j", () => undefined), cron).toThrow(/5 .* or 6/);
    }
    const five = a.schedule("0 2 * * *", "five", () => undefined);
    const six = a.schedule("0 0 2 * * *", "six", () => undefined);
    void five.stop();
    void six.stop();
  });
});

describe("runOnce results in JSON", () => {
  it("JSON.stringify writes every outcome, tokens as decimal strings", async () => {
    const [a, b] = replicas();
    const ran = await a.runOnce("invoices", "2026-12-01", () => ({ billed: 3 }));
    if (ran.outcome !== "ran") throw new Error(`unexpected ${ran.outcome}`);
    expect(JSON.parse(JSON.stringify(ran))).toEqual({
      outcome: "ran",
      value: { billed: 3 },
      attempt: 1,
      token: ran.token.toString(),
    });
    const done = await b.runOnce("invoices", "2026-12-01", () => undefined);
    const doneJson = JSON.parse(JSON.stringify(done));
    expect(doneJson).toMatchObject({
      outcome: "already-done",
      record: { state: "done", attempt: 1, token: ran.token.toString(), holder: "replica-0" },
    });
    expect(BigInt(doneJson.record.token)).toBe(ran.token);
    const failed = await a.runOnce(
      "invoices",
      "2026-12-02",
      () => {
        throw new Error("payment API down");
      },
      { maxAttempts: 1 },
    );
    if (failed.outcome !== "failed") throw new Error(`unexpected ${failed.outcome}`);
    expect(JSON.parse(JSON.stringify(failed))).toEqual({
      outcome: "failed",
      error: { name: "Error", message: "payment API down" },
      attempt: 1,
      token: failed.token.toString(),
      attemptsLeft: 0,
    });
    const exhausted = await b.runOnce("invoices", "2026-12-02", () => undefined, {
      maxAttempts: 1,
    });
    expect(JSON.parse(JSON.stringify(exhausted))).toMatchObject({
      outcome: "attempts-exhausted",
      record: { state: "failed", error: "payment API down", token: failed.token.toString() },
    });
    let finish: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const running = a.runOnce("invoices", "2026-12-03", () => gate);
    await until(async () => (await b.holder("invoices/slot/2026-12-03")) !== null);
    const elsewhere = await b.runOnce("invoices", "2026-12-03", () => undefined);
    expect(JSON.parse(JSON.stringify(elsewhere))).toMatchObject({
      outcome: "running-elsewhere",
      holder: { ownerId: "replica-0", token: expect.stringMatching(/^\d+$/) },
    });
    finish();
    await running;
    // The JSON form is not a field: spreads, keys and equality see the result as before.
    expect(Object.keys(ran).sort()).toEqual(["attempt", "outcome", "token", "value"]);
  });

  it("a stopped run's ScheduleStoppedError is written with its code", async () => {
    const [a] = replicas();
    const results: RunOnceResult<unknown>[] = [];
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const schedule = a.schedule(
      "* * * * * *",
      "long",
      () =>
        new Promise<never>(() => {
          started();
        }),
      { onResult: (result) => results.push(result) },
    );
    await running;
    await schedule.stop();
    expect(JSON.parse(JSON.stringify(results[0]))).toMatchObject({
      outcome: "failed",
      error: { name: "ScheduleStoppedError", code: "BATON_SCHEDULE_STOPPED" },
    });
  });
});
