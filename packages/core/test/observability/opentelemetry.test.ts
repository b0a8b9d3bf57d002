import { context, trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  enableOpenTelemetry,
  LockHeldError,
  type LockLostError,
  LockTimeoutError,
  MemoryBackend,
  MemoryStore,
  type OpenTelemetryHandle,
} from "../../src/index.js";
import { ScriptedBackend } from "../support/scripted-backend.js";
import { histogram, hrMs, TelemetryRecorder, useAsyncContext } from "../support/telemetry.js";

const open: Coordinator[] = [];
const recorders: TelemetryRecorder[] = [];
const handles: OpenTelemetryHandle[] = [];
afterEach(async () => {
  for (const h of handles.splice(0)) h.stop();
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
  await Promise.allSettled(recorders.splice(0).map((r) => r.shutdown()));
});

const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 10_000) => {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** A coordinator recording into a fresh {@link TelemetryRecorder}. */
async function instrumented(
  coordinator: Coordinator,
  options: { metricName?: (name: string) => string | undefined } = {},
): Promise<TelemetryRecorder> {
  open.push(coordinator);
  const recorder = new TelemetryRecorder();
  recorders.push(recorder);
  handles.push(
    await enableOpenTelemetry(coordinator, {
      tracerProvider: recorder.tracerProvider,
      meterProvider: recorder.meterProvider,
      ...options,
    }),
  );
  return recorder;
}

describe("OpenTelemetry spans", () => {
  it("an acquire is a baton.acquire span under the caller's span, and its hold a baton.hold span linked to it", async () => {
    useAsyncContext();
    const coordinator = createCoordinator({ url: "memory://", ownerId: "worker-1" });
    const recorder = await instrumented(coordinator);
    const parent = recorder.tracerProvider.getTracer("app").startSpan("request");
    const lock = await context.with(trace.setSpan(context.active(), parent), () =>
      coordinator.acquire("invoices"),
    );
    expect(recorder.spans("baton.hold")).toEqual([]);
    await lock.release();
    parent.end();

    const [acquire] = recorder.spans("baton.acquire");
    const [hold] = recorder.spans("baton.hold");
    if (acquire === undefined || hold === undefined) throw new Error("spans missing");
    expect(acquire.instrumentationScope.name).toBe("@baton/core");
    expect(acquire.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    expect(acquire.spanContext().traceId).toBe(parent.spanContext().traceId);
    expect(acquire.attributes).toMatchObject({
      "baton.lock.name": "invoices",
      "baton.lock.token": lock.token.toString(),
      "baton.backend": "memory",
    });
    expect(typeof acquire.attributes["baton.lock.waited_ms"]).toBe("number");
    expect(acquire.status.code).toBe(0);
    expect(hold.attributes).toMatchObject({
      "baton.lock.name": "invoices",
      "baton.lock.token": lock.token.toString(),
      "baton.backend": "memory",
      "baton.owner_id": "worker-1",
      "baton.lock.end": "released",
    });
    expect(hold.links.map((l) => l.context.spanId)).toEqual([acquire.spanContext().spanId]);
    expect(hold.status.code).toBe(0);
    // The hold starts where the acquire ends.
    expect(hrMs(hold.startTime)).toBeCloseTo(hrMs(acquire.endTime), 0);
  });

  it("a contended acquire's span covers its wait, and the wait histogram counts it", async () => {
    const backend = new MemoryBackend();
    const a = createCoordinator({ backend, ownerId: "a", closeBackend: false });
    const b = createCoordinator({ backend, ownerId: "b" });
    const recorder = await instrumented(b);
    open.push(a);
    const first = await a.acquire("reports");
    const waiting = b.acquire("reports", { waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 150));
    await first.release();
    const second = await waiting;
    await second.release();

    const [acquire] = recorder.spans("baton.acquire");
    if (acquire === undefined) throw new Error("no acquire span");
    const waitedMs = acquire.attributes["baton.lock.waited_ms"] as number;
    expect(waitedMs).toBeGreaterThanOrEqual(100);
    expect(hrMs(acquire.endTime) - hrMs(acquire.startTime)).toBeCloseTo(waitedMs, 0);
    const [point] = await recorder.points("baton.lock.wait.duration");
    expect(point?.attributes).toEqual({
      "baton.lock.name": "reports",
      "baton.lock.outcome": "acquired",
    });
    expect(histogram(point).count).toBe(1);
    expect(histogram(point).sum).toBeGreaterThanOrEqual(0.1);
    expect(await recorder.unit("baton.lock.wait.duration")).toBe("s");
    const [granted] = await recorder.points("baton.lock.acquire.duration");
    expect(granted?.attributes).toEqual({ "baton.lock.name": "reports" });
    expect(histogram(granted).sum).toBeCloseTo(histogram(point).sum ?? 0, 3);
  });

  it("a failed acquire is a baton.acquire span with an error status, its outcome and attempts", async () => {
    const backend = new MemoryBackend();
    const a = createCoordinator({ backend, ownerId: "a", closeBackend: false });
    const b = createCoordinator({ backend, ownerId: "b" });
    open.push(a);
    const recorder = await instrumented(b);
    const held = await a.acquire("reports");
    const error = await b.acquire("reports", { waitMs: 100 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTimeoutError);
    await expect(b.acquire("reports", { waitMs: 0 })).rejects.toBeInstanceOf(LockHeldError);
    await held.release();
    const spans = recorder.spans("baton.acquire");
    expect(spans.map((s) => [s.attributes["baton.lock.outcome"], s.status.code])).toEqual([
      ["timeout", 2],
      ["held", 2],
    ]);
    const [timeout] = spans;
    expect(timeout?.attributes).toMatchObject({
      "baton.lock.name": "reports",
      "baton.backend": "memory",
      "baton.error.code": "BATON_LOCK_TIMEOUT",
    });
    expect(timeout?.attributes["baton.lock.waited_ms"]).toBeGreaterThanOrEqual(90);
    expect(timeout?.attributes["baton.lock.attempts"]).toBeGreaterThanOrEqual(1);
    expect(timeout?.status.message).toBe((error as Error).message);
    expect(timeout?.events.map((e) => e.name)).toEqual(["exception"]);
    // Only the acquire that waited is a wait; neither is a grant.
    const points = await recorder.points("baton.lock.wait.duration");
    expect(points.map((p) => [p.attributes, histogram(p).count])).toEqual([
      [{ "baton.lock.name": "reports", "baton.lock.outcome": "timeout" }, 1],
    ]);
    expect(await recorder.points("baton.lock.acquire.duration")).toEqual([]);
    expect(recorder.spans("baton.hold")).toEqual([]);
  });

  it("contention and waiting show in baton.lock.contentions and baton.lock.waiters", async () => {
    const backend = new MemoryBackend();
    const a = createCoordinator({ backend, ownerId: "a", closeBackend: false });
    const b = createCoordinator({ backend, ownerId: "b" });
    open.push(a);
    const recorder = await instrumented(b);
    const held = await a.acquire("queue");
    const waiting = b.acquire("queue", { waitMs: 10_000 });
    await until(async () => (await recorder.points("baton.lock.waiters"))[0]?.value === 1);
    expect(await recorder.points("baton.lock.contentions")).toEqual([
      { attributes: { "baton.lock.name": "queue" }, value: 1 },
    ]);
    await held.release();
    const lock = await waiting;
    expect(await recorder.points("baton.lock.waiters")).toEqual([
      { attributes: { "baton.lock.name": "queue" }, value: 0 },
    ]);
    await lock.release();
    const [acquire] = recorder.spans("baton.acquire");
    expect(acquire?.attributes["baton.lock.attempts"]).toBeGreaterThanOrEqual(1);
  });

  it("a wait that began before recording did never takes baton.lock.waiters below 0", async () => {
    const backend = new MemoryBackend();
    const a = createCoordinator({ backend, ownerId: "a", closeBackend: false });
    const b = createCoordinator({ backend, ownerId: "b" });
    open.push(a, b);
    const held = await a.acquire("queue");
    const waiting = b.acquire("queue", { waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 50));
    const recorder = new TelemetryRecorder();
    recorders.push(recorder);
    handles.push(
      await enableOpenTelemetry(b, {
        tracerProvider: recorder.tracerProvider,
        meterProvider: recorder.meterProvider,
      }),
    );
    await held.release();
    await (await waiting).release();
    const points = await recorder.points("baton.lock.waiters");
    expect(points.filter((p) => (p.value as number) < 0)).toEqual([]);
    // The wait itself is still timed.
    const [wait] = await recorder.points("baton.lock.wait.duration");
    expect(histogram(wait).count).toBe(1);
  });

  it("a hold past warnHeldMs gets a baton.held_too_long event", async () => {
    const coordinator = createCoordinator({ url: "memory://", warnHeldMs: 50 });
    const recorder = await instrumented(coordinator);
    const lock = await coordinator.acquire("slow");
    await new Promise((r) => setTimeout(r, 150));
    await lock.release();
    const [hold] = recorder.spans("baton.hold");
    const event = hold?.events.find((e) => e.name === "baton.held_too_long");
    expect(event?.attributes?.["baton.lock.threshold_ms"]).toBe(50);
    expect(event?.attributes?.["baton.lock.held_ms"]).toBeGreaterThan(40);
  });

  it("a lost lock ends its hold span with an error status, the reason and the exception", async () => {
    const backend = new ScriptedBackend();
    const coordinator = createCoordinator({ backend, ttlMs: 300 });
    const recorder = await instrumented(coordinator);
    const lock = await coordinator.acquire("ledger");
    backend.hooks.keepAlive = async (_session, next) => ({
      ...(await next()),
      lostKeys: ["ledger"],
    });
    await until(() => lock.signal.aborted);
    await until(() => recorder.spans("baton.hold").length === 1);
    const [hold] = recorder.spans("baton.hold");
    expect(hold?.attributes).toMatchObject({
      "baton.lock.end": "lost",
      "baton.lock.lost_reason": "key-lost",
    });
    expect(hold?.status).toEqual({
      code: 2,
      message: (lock.signal.reason as LockLostError).message,
    });
    expect(hold?.events.map((e) => e.name)).toContain("exception");
    await lock.release();
    // The release after the loss ends nothing more.
    expect(recorder.spans("baton.hold")).toHaveLength(1);
    const [point] = await recorder.points("baton.lock.hold.duration");
    expect(point?.attributes).toEqual({ "baton.lock.name": "ledger", "baton.lock.end": "lost" });
    expect(histogram(point).count).toBe(1);
  });

  it("a lock an operator released by force ends its hold span as revoked, with the reason", async () => {
    const backend = new MemoryBackend();
    const holder = createCoordinator({
      backend,
      ownerId: "holder",
      ttlMs: 600,
      closeBackend: false,
    });
    const operator = createCoordinator({ backend, ownerId: "operator" });
    const recorder = await instrumented(holder);
    const operatorRecorder = await instrumented(operator);
    const lock = await holder.acquire("ledger");
    const result = await operator.forceRelease("ledger", {
      reason: "worker hung on the bank API",
      token: lock.token,
    });
    expect(result).toMatchObject({ released: true });
    await until(() => lock.signal.aborted);
    await until(() => recorder.spans("baton.hold").length === 1);
    const [hold] = recorder.spans("baton.hold");
    expect(hold?.attributes).toMatchObject({
      "baton.lock.end": "lost",
      "baton.lock.lost_reason": "revoked",
      "baton.lock.lost_detail": "worker hung on the bank API",
    });
    expect(hold?.status.code).toBe(2);
    expect(await recorder.points("baton.lock.revocations")).toEqual([
      { attributes: { "baton.lock.name": "ledger", "baton.revocation.side": "holder" }, value: 1 },
    ]);
    expect(await operatorRecorder.points("baton.lock.revocations")).toEqual([
      {
        attributes: { "baton.lock.name": "ledger", "baton.revocation.side": "operator" },
        value: 1,
      },
    ]);
  });

  it("a failed renewal is a baton.renew_failed event on the holds it puts at risk", async () => {
    const backend = new ScriptedBackend();
    const coordinator = createCoordinator({ backend, ttlMs: 600 });
    const recorder = await instrumented(coordinator);
    const lock = await coordinator.acquire("ledger");
    let failures = 0;
    backend.hooks.keepAlive = async (_session, next) => {
      if (failures++ === 0) throw new Error("connection reset");
      return await next();
    };
    await until(async () => {
      const [p] = await recorder.points("baton.lock.renewal_failures");
      return p !== undefined;
    });
    await lock.release();
    const [hold] = recorder.spans("baton.hold");
    const event = hold?.events.find((e) => e.name === "baton.renew_failed");
    expect(event?.attributes?.["exception.message"]).toMatch(/connection reset/);
    expect(typeof event?.attributes?.["baton.session.remaining_ms"]).toBe("number");
    expect(hold?.status.code).toBe(0);
    expect(await recorder.points("baton.lock.renewal_failures")).toEqual([
      { attributes: { "baton.lock.name": "ledger" }, value: 1 },
    ]);
  });

  it("an election term is a baton.election.term span linked to the hold of its lock", async () => {
    const coordinator = createCoordinator({ url: "memory://", ttlMs: 1_000 });
    const recorder = await instrumented(coordinator);
    let term = 0n;
    const election = coordinator.elect("scheduler", {
      onElected: (t) => {
        term = t.term;
      },
    });
    await until(() => election.isLeader);
    expect(await recorder.points("baton.election.leader")).toEqual([
      { attributes: { "baton.election.name": "scheduler" }, value: 1 },
    ]);
    await election.resign();
    await until(() => recorder.spans("baton.election.term").length === 1);
    const [span] = recorder.spans("baton.election.term");
    const [hold] = recorder.spans("baton.hold");
    expect(span?.attributes).toMatchObject({
      "baton.election.name": "scheduler",
      "baton.election.term": term.toString(),
      "baton.election.end_reason": "resigned",
    });
    expect(span?.status.code).toBe(0);
    expect(span?.links.map((l) => l.context.spanId)).toEqual([hold?.spanContext().spanId]);
    expect(await recorder.points("baton.election.leader")).toEqual([
      { attributes: { "baton.election.name": "scheduler" }, value: 0 },
    ]);
    expect(await recorder.points("baton.election.terms")).toEqual([
      { attributes: { "baton.election.name": "scheduler" }, value: 1 },
    ]);
  });

  it("an instance that campaigns without leading reports baton.election.leader 0", async () => {
    const backend = new MemoryBackend();
    const leader = createCoordinator({ backend, ownerId: "leader", closeBackend: false });
    const follower = createCoordinator({ backend, ownerId: "follower" });
    open.push(leader);
    const recorder = await instrumented(follower);
    const leading = leader.elect("scheduler", { onElected: () => undefined });
    await until(() => leading.isLeader);
    follower.elect("scheduler", { onElected: () => undefined });
    await until(async () => (await recorder.points("baton.election.leader")).length > 0);
    expect(await recorder.points("baton.election.leader")).toEqual([
      { attributes: { "baton.election.name": "scheduler" }, value: 0 },
    ]);
  });

  it("a runOnce call is a baton.job.run span from its acquire to its outcome, and job metrics keep slots out", async () => {
    const coordinator = createCoordinator({ url: "memory://" });
    const recorder = await instrumented(coordinator);
    await coordinator.runOnce("nightly", "2026-12-01", async () => {
      await new Promise((r) => setTimeout(r, 50));
    });
    await coordinator.runOnce("nightly", "2026-12-01", () => undefined);
    const runs = recorder.spans("baton.job.run");
    expect(runs.map((s) => s.attributes["baton.job.outcome"])).toEqual(["ran", "already-done"]);
    const [ran] = runs;
    expect(ran?.attributes).toMatchObject({
      "baton.job.name": "nightly",
      "baton.job.slot": "2026-12-01",
      "baton.job.attempt": 1,
    });
    expect(hrMs(ran?.endTime ?? [0, 0]) - hrMs(ran?.startTime ?? [0, 0])).toBeGreaterThan(40);
    const [hold] = recorder.spans("baton.hold");
    expect(hold?.attributes["baton.lock.name"]).toBe("nightly/slot/2026-12-01");
    expect(ran?.links.map((l) => l.context.spanId)).toEqual([hold?.spanContext().spanId]);
    expect((await recorder.points("baton.job.runs")).map((p) => [p.attributes, p.value])).toEqual([
      [{ "baton.job.name": "nightly", "baton.job.outcome": "ran" }, 1],
      [{ "baton.job.name": "nightly", "baton.job.outcome": "already-done" }, 1],
    ]);
    const [granted] = await recorder.points("baton.lock.acquire.duration");
    expect(granted?.attributes).toEqual({ "baton.lock.name": "nightly/slot/*" });
    const [success] = await recorder.points("baton.job.last_success");
    expect(success?.attributes).toEqual({ "baton.job.name": "nightly" });
    expect(success?.value).toBeCloseTo(Date.now() / 1_000, -1);
  });
});

describe("OpenTelemetry metrics", () => {
  it("baton.lock.held counts the names held, and the hold histogram the holds", async () => {
    const coordinator = createCoordinator({ url: "memory://" });
    const recorder = await instrumented(coordinator);
    const a = await coordinator.acquire("a");
    const b = await coordinator.acquire("b");
    expect(await recorder.points("baton.lock.held")).toEqual([
      { attributes: { "baton.lock.name": "a" }, value: 1 },
      { attributes: { "baton.lock.name": "b" }, value: 1 },
    ]);
    await a.release();
    await b.release();
    expect(await recorder.points("baton.lock.held")).toEqual([
      { attributes: { "baton.lock.name": "a" }, value: 0 },
      { attributes: { "baton.lock.name": "b" }, value: 0 },
    ]);
    const holds = await recorder.points("baton.lock.hold.duration");
    expect(holds.map((p) => [p.attributes["baton.lock.name"], histogram(p).count])).toEqual([
      ["a", 1],
      ["b", 1],
    ]);
  });

  it("metricName groups names, or leaves the name out when it returns undefined", async () => {
    const coordinator = createCoordinator({ url: "memory://" });
    const recorder = await instrumented(coordinator, {
      metricName: (name) => {
        if (name.startsWith("invoice/")) return "invoice/*";
        return name.startsWith("nightly/") ? name : undefined;
      },
    });
    for (const name of ["invoice/1", "invoice/2", "secret-customer-42"]) {
      await (await coordinator.acquire(name)).release();
    }
    const points = await recorder.points("baton.lock.acquire.duration");
    expect(points.map((p) => [p.attributes, histogram(p).count])).toEqual([
      [{ "baton.lock.name": "invoice/*" }, 2],
      [{}, 1],
    ]);
    // A slot stays grouped whatever the mapping returns.
    await coordinator.runOnce("nightly", "2026-12-01", () => undefined);
    const slots = await recorder.points("baton.lock.acquire.duration");
    expect(slots.map((p) => p.attributes)).toEqual([
      { "baton.lock.name": "invoice/*" },
      {},
      { "baton.lock.name": "nightly/slot/*" },
    ]);
    // Spans keep the full name.
    expect(recorder.spans("baton.acquire").map((s) => s.attributes["baton.lock.name"])).toEqual([
      "invoice/1",
      "invoice/2",
      "secret-customer-42",
      "nightly/slot/2026-12-01",
    ]);
  });

  it("past maxNames, further names are counted under other", async () => {
    const coordinator = createCoordinator({ url: "memory://" });
    open.push(coordinator);
    const recorder = new TelemetryRecorder();
    recorders.push(recorder);
    handles.push(
      await enableOpenTelemetry(coordinator, {
        tracerProvider: false,
        meterProvider: recorder.meterProvider,
        maxNames: 2,
      }),
    );
    for (const name of ["a", "b", "c", "d"]) await (await coordinator.acquire(name)).release();
    const points = await recorder.points("baton.lock.acquire.duration");
    expect(points.map((p) => [p.attributes["baton.lock.name"], histogram(p).count])).toEqual([
      ["a", 1],
      ["b", 1],
      ["other", 2],
    ]);
    expect(recorder.spans()).toEqual([]);
  });
});

describe("enableOpenTelemetry", () => {
  it("uses the global providers of @opentelemetry/api when none are given", async () => {
    const recorder = new TelemetryRecorder();
    recorders.push(recorder);
    expect(trace.setGlobalTracerProvider(recorder.tracerProvider)).toBe(true);
    try {
      const coordinator = createCoordinator({ url: "memory://" });
      open.push(coordinator);
      const handle = await enableOpenTelemetry(coordinator, { meterProvider: false });
      handles.push(handle);
      await (await coordinator.acquire("global")).release();
      expect(recorder.spans().map((s) => s.name)).toEqual(["baton.acquire", "baton.hold"]);
    } finally {
      trace.disable();
    }
  });

  it("stop() ends the open holds and records nothing more", async () => {
    const coordinator = createCoordinator({ url: "memory://" });
    const recorder = await instrumented(coordinator);
    const lock = await coordinator.acquire("kept");
    for (const h of handles.splice(0)) h.stop();
    const [hold] = recorder.spans("baton.hold");
    expect(hold?.attributes["baton.telemetry.stopped"]).toBe(true);
    await lock.release();
    await (await coordinator.acquire("after")).release();
    expect(recorder.spans().map((s) => s.attributes["baton.lock.name"])).toEqual(["kept", "kept"]);
    expect(await recorder.points("baton.lock.held")).toEqual([]);
  });

  it("rejects bad options with a ConfigError naming the field, before subscribing", async () => {
    const coordinator = createCoordinator({ url: "memory://" });
    open.push(coordinator);
    const bad = [
      [{ maxNames: 0 }, "maxNames"],
      [{ metricName: "invoice/*" }, "metricName"],
      [{ tracerProvider: {} }, "tracerProvider"],
      [{ meterProvider: { getTracer() {} } }, "meterProvider"],
    ] as const;
    for (const [options, field] of bad) {
      const error = await enableOpenTelemetry(coordinator, options as never).catch((e) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toContain(field);
    }
  });

  it("accepts the SDK's providers as they are typed", async () => {
    const store = new MemoryStore();
    const coordinator = createCoordinator({ backend: new MemoryBackend({ store }) });
    open.push(coordinator);
    const recorder = new TelemetryRecorder();
    recorders.push(recorder);
    // Type-checked: the SDK's classes fit the shapes Baton declares.
    handles.push(
      await enableOpenTelemetry(coordinator, {
        tracerProvider: recorder.tracerProvider,
        meterProvider: recorder.meterProvider,
      }),
    );
    await (await coordinator.acquire("typed")).release();
    expect(recorder.spans()).toHaveLength(2);
  });
});
