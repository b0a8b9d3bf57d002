import { TcpProxy } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { afterEach, expect, it } from "vitest";
import {
  type Coordinator,
  createCoordinator,
  enableOpenTelemetry,
  type OpenTelemetryHandle,
} from "../../src/index.js";
import { histogram, TelemetryRecorder } from "../support/telemetry.js";

const open: Coordinator[] = [];
const recorders: TelemetryRecorder[] = [];
const handles: OpenTelemetryHandle[] = [];
const proxies: TcpProxy[] = [];
afterEach(async () => {
  for (const h of handles.splice(0)) h.stop();
  // A proxy closed first resets its connections, so a coordinator cut off closes at once.
  await Promise.allSettled(proxies.splice(0).map((p) => p.close()));
  await Promise.allSettled(open.splice(0).map((c) => c.close()));
  await Promise.allSettled(recorders.splice(0).map((r) => r.shutdown()));
});

const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 20_000) => {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

async function instrumented(url: string, ownerId: string, ttlMs = 5_000) {
  const coordinator = createCoordinator({ url, ownerId, ttlMs });
  open.push(coordinator);
  const recorder = new TelemetryRecorder();
  recorders.push(recorder);
  handles.push(
    await enableOpenTelemetry(coordinator, {
      tracerProvider: recorder.tracerProvider,
      meterProvider: recorder.meterProvider,
    }),
  );
  return { coordinator, recorder };
}

/** `url` with its host replaced by a proxy's. */
function through(url: string, proxy: TcpProxy): string {
  const parsed = new URL(url);
  parsed.host = `${proxy.host}:${proxy.port}`;
  return parsed.href;
}

for (const kind of ["redis", "postgres"] as const) {
  describeBackend(kind, (url) => {
    const name = (suffix: string) => `otel-${kind}-${suffix}-${process.pid}-${Date.now()}`;

    it("records the acquire and the hold with the store's kind and token", async () => {
      const { coordinator, recorder } = await instrumented(url, "worker-1");
      const lockName = name("spans");
      const lock = await coordinator.acquire(lockName);
      await lock.release();
      const [acquire] = recorder.spans("baton.acquire");
      const [hold] = recorder.spans("baton.hold");
      expect(acquire?.attributes).toMatchObject({
        "baton.lock.name": lockName,
        "baton.lock.token": lock.token.toString(),
        "baton.backend": kind,
      });
      expect(hold?.attributes).toMatchObject({
        "baton.lock.name": lockName,
        "baton.lock.token": lock.token.toString(),
        "baton.backend": kind,
        "baton.owner_id": "worker-1",
        "baton.lock.end": "released",
      });
      expect(hold?.links.map((l) => l.context.spanId)).toEqual([acquire?.spanContext().spanId]);
      expect(hold?.status.code).toBe(0);
    });

    it("a contended acquire waits in its span and in the wait histogram", async () => {
      const holder = createCoordinator({ url, ownerId: "holder" });
      open.push(holder);
      const { coordinator, recorder } = await instrumented(url, "waiter");
      const lockName = name("contended");
      const first = await holder.acquire(lockName);
      const waiting = coordinator.acquire(lockName, { waitMs: 20_000 });
      await new Promise((r) => setTimeout(r, 300));
      await first.release();
      const second = await waiting;
      await second.release();
      const [acquire] = recorder.spans("baton.acquire");
      expect(acquire?.attributes["baton.lock.waited_ms"]).toBeGreaterThanOrEqual(250);
      const [point] = await recorder.points("baton.lock.wait.duration");
      expect(point?.attributes).toEqual({
        "baton.lock.name": lockName,
        "baton.lock.outcome": "acquired",
      });
      expect(histogram(point).count).toBe(1);
      expect(histogram(point).sum).toBeGreaterThanOrEqual(0.25);
    });

    it("a lock an operator released by force ends its hold span as revoked, with the reason", async () => {
      const { coordinator, recorder } = await instrumented(url, "holder", 2_000);
      const operator = createCoordinator({ url, ownerId: "operator" });
      open.push(operator);
      const lockName = name("revoked");
      const lock = await coordinator.acquire(lockName);
      const result = await operator.forceRelease(lockName, {
        reason: "worker hung on the bank API",
        token: lock.token,
      });
      expect(result).toMatchObject({ released: true });
      await until(() => recorder.spans("baton.hold").length === 1);
      const [hold] = recorder.spans("baton.hold");
      expect(hold?.attributes).toMatchObject({
        "baton.lock.name": lockName,
        "baton.lock.end": "lost",
        "baton.lock.lost_reason": "revoked",
        "baton.lock.lost_detail": "worker hung on the bank API",
      });
      expect(hold?.status.code).toBe(2);
      expect(await recorder.points("baton.lock.revocations")).toEqual([
        {
          attributes: { "baton.lock.name": lockName, "baton.revocation.side": "holder" },
          value: 1,
        },
      ]);
    });

    it("a store out of reach records failed renewals on the hold, then its loss", async () => {
      const target = new URL(url);
      const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port) });
      proxies.push(proxy);
      const { coordinator, recorder } = await instrumented(through(url, proxy), "cut-off", 2_000);
      const lockName = name("lost");
      const lock = await coordinator.acquire(lockName);
      proxy.blackhole();
      await until(() => lock.signal.aborted);
      await until(() => recorder.spans("baton.hold").length === 1);
      const [hold] = recorder.spans("baton.hold");
      expect(hold?.attributes).toMatchObject({
        "baton.lock.name": lockName,
        "baton.lock.end": "lost",
        "baton.lock.lost_reason": lock.lostReason,
      });
      expect(hold?.status.code).toBe(2);
      const events = hold?.events.map((e) => e.name) ?? [];
      expect(events).toContain("baton.renew_failed");
      expect(events).toContain("exception");
      const [failures] = await recorder.points("baton.lock.renewal_failures");
      expect(failures?.value).toBeGreaterThanOrEqual(1);
      const [held] = await recorder.points("baton.lock.held");
      expect(held?.value).toBe(0);
    });
  });
}
