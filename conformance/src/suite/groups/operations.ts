import {
  ConfigError,
  type Coordinator,
  type Inspection,
  LockLostError,
  MemoryFence,
  StaleTokenError,
} from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { type LockWorker, spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { delay, type SuiteContext } from "../suite-context.js";

type Lost = Extract<WorkerEvent, { event: "lost" }>;
type Acquired = Extract<WorkerEvent, { event: "acquired" }>;

/** Everything `list()` yields under `prefix`. */
async function listAll(
  coordinator: Coordinator,
  prefix: string,
  limit?: number,
): Promise<Inspection[]> {
  const items: Inspection[] = [];
  for await (const item of coordinator.list({ prefix, ...(limit !== undefined ? { limit } : {}) }))
    items.push(item);
  return items;
}

/** Polls `inspect(name)` until `until` holds of it, or throws with the last view after `ms`. */
async function inspectUntil(
  coordinator: Coordinator,
  name: string,
  until: (view: Inspection | null) => boolean,
  ms: number,
): Promise<Inspection | null> {
  const deadline = performance.now() + ms;
  for (;;) {
    const view = await coordinator.inspect(name);
    if (until(view)) return view;
    if (performance.now() > deadline) {
      throw new Error(`inspect("${name}") did not reach the expected state: ${show(view)}`);
    }
    await delay(50);
  }
}

function show(view: unknown): string {
  return JSON.stringify(view, (_, v) => (typeof v === "bigint" ? `${v}n` : v));
}

/**
 * What operators do in production: list and inspect every lock under the prefix, and force a
 * stuck one free. Checks what the backend declares: `inspection` (`list()` and `inspect()`)
 * and `forceRelease` (`"grant"` or `"session"`); a backend that declares neither must refuse
 * both with a `ConfigError`. Holders run in worker processes where the backend is
 * cross-process, so the forced release reaches another process's lock, as it does in
 * production.
 */
export function operationsGroup(ctx: SuiteContext, url: (() => string) | undefined): void {
  describe("operations: inspection and forced release", () => {
    const workers: LockWorker[] = [];
    afterEach(async () => {
      await Promise.allSettled(workers.splice(0).map((w) => w.kill()));
    });
    const ttl = ctx.target.ttlMs;
    const inspection = () => ctx.backend.guarantees.inspection === true;
    const forcing = () => ctx.backend.guarantees.forceRelease;
    const fenced = () => ctx.backend.guarantees.fencing !== "none";

    it("a backend that declares no inspection refuses list() and inspect() with a ConfigError", async ({
      skip,
    }) => {
      if (inspection()) skip(`${ctx.target.name} declares inspection`);
      const a = ctx.coordinator();
      await expect(a.inspect(ctx.name("ops"))).rejects.toBeInstanceOf(ConfigError);
      await expect(listAll(a, ctx.name("ops"))).rejects.toBeInstanceOf(ConfigError);
    });

    it("a backend that declares no forced release refuses it with a ConfigError, and the holder keeps its lock", async ({
      skip,
    }) => {
      if (forcing() !== undefined) skip(`${ctx.target.name} declares forceRelease`);
      const a = ctx.coordinator();
      const name = ctx.name("ops-no-force");
      const lock = await a.acquire(name);
      await expect(
        ctx.coordinator().forceRelease(name, { reason: "stuck" }),
      ).rejects.toBeInstanceOf(ConfigError);
      expect(lock.held).toBe(true);
      await lock.release();
    });

    it("inspect(): a held lock shows its holder, token, value and time left; a released one is gone", async ({
      skip,
    }) => {
      if (!inspection()) skip(`${ctx.target.name} declares no inspection`);
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("ops-inspect");
      expect(await b.inspect(name)).toBeNull();
      const lock = await a.acquire(name, { value: "worker-7" });
      const view = await b.inspect(name);
      expect(view?.kind, show(view)).toBe("lock");
      expect(view?.name).toBe(name);
      expect(view?.holders).toHaveLength(1);
      const holder = view?.holders[0];
      expect(holder?.ownerId).toBe(a.ownerId);
      expect(holder?.value).toBe("worker-7");
      if (fenced()) expect(holder?.token).toBe(lock.token);
      if (holder?.remainingMs !== undefined) {
        expect(holder.remainingMs).toBeGreaterThan(0);
        expect(holder.remainingMs).toBeLessThanOrEqual(ttl);
      }
      if (holder?.heldMs !== undefined) expect(holder.heldMs).toBeGreaterThanOrEqual(0);
      await lock.release();
      expect(await inspectUntil(b, name, (v) => v === null, 5_000)).toBeNull();
    });

    it("inspect(): a waiter shows while it waits, and not after it gave up", async ({ skip }) => {
      if (!inspection()) skip(`${ctx.target.name} declares no inspection`);
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const name = ctx.name("ops-waiter");
      const lock = await a.acquire(name);
      const controller = new AbortController();
      const waiting = b.acquire(name, { waitMs: 30_000, signal: controller.signal });
      waiting.catch(() => {});
      const view = await inspectUntil(
        a,
        name,
        (v) => v?.waiters === undefined || v.waiters.count >= 1,
        5_000,
      );
      if (view?.waiters !== undefined) {
        expect(view.waiters.count, show(view)).toBe(1);
        if (view.waiters.ownerIds !== undefined) expect(view.waiters.ownerIds).toEqual([b.ownerId]);
      }
      controller.abort();
      await expect(waiting).rejects.toBeDefined();
      await inspectUntil(a, name, (v) => (v?.waiters?.count ?? 0) === 0, 5_000);
      await lock.release();
    });

    it("list(): every lock under the prefix once, paged by limit; a lock whose lease ran out is not listed", async ({
      skip,
    }) => {
      if (!inspection()) skip(`${ctx.target.name} declares no inspection`);
      const a = ctx.coordinator();
      const prefix = ctx.name("ops-list/");
      const names = Array.from({ length: 5 }, (_, i) => `${prefix}lock-${i}`);
      const held = await Promise.all(names.map((n) => a.acquire(n)));
      await ctx.frozenHolder(`${prefix}expired`);
      await delay(ttl * 2 + 500);
      const other = await ctx.coordinator().acquire(ctx.name("ops-list-outside"));
      const items = await listAll(ctx.coordinator(), prefix);
      expect(items.map((i) => i.name).sort(), show(items)).toEqual([...names].sort());
      for (const item of items) {
        expect(item.kind).toBe("lock");
        expect(item.holders.map((h) => h.ownerId)).toEqual([a.ownerId]);
      }
      expect(await listAll(ctx.coordinator(), prefix, 2)).toHaveLength(2);
      await Promise.all([...held, other].map((l) => l.release()));
    });

    it("list(): semaphores and read-write locks with their holders and permits used", async ({
      skip,
    }) => {
      if (!inspection()) skip(`${ctx.target.name} declares no inspection`);
      if (!ctx.backend.guarantees.semaphores) skip(`${ctx.target.name} declares no semaphores`);
      const a = ctx.coordinator();
      const prefix = ctx.name("ops-permits/");
      const permits = await a.semaphore(`${prefix}sem`, { permits: 3 }).acquire({ permits: 2 });
      const read = await a.readWriteLock(`${prefix}rw`).read();
      const items = await listAll(ctx.coordinator(), prefix);
      const byName = new Map(items.map((i) => [i.name, i]));
      const sem = byName.get(`${prefix}sem`);
      expect(sem?.kind, show(items)).toBe("semaphore");
      expect(sem?.permits).toEqual({ used: 2, limit: 3 });
      expect(sem?.holders.map((h) => [h.ownerId, h.permits])).toEqual([[a.ownerId, 2]]);
      const rw = byName.get(`${prefix}rw`);
      expect(rw?.kind, show(items)).toBe("read-write-lock");
      expect(rw?.holders.map((h) => [h.ownerId, h.mode])).toEqual([[a.ownerId, "read"]]);
      await Promise.all([permits.release(), read.release()]);
    });

    it("forceRelease(): the holder's signal aborts with revoked and the reason within one renewal interval; the waiter holds at once with a greater token", async ({
      skip,
    }) => {
      if (forcing() === undefined) skip(`${ctx.target.name} declares no forced release`);
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const operator = ctx.coordinator();
      const name = ctx.name("ops-force");
      const lock = await a.acquire(name);
      const waiting = b.acquire(name, { waitMs: 30_000 });
      await delay(200);
      const forcedAt = performance.now();
      const result = await operator.forceRelease(name, { reason: "stuck on a dead socket" });
      expect(result.released, show(result)).toBe(true);
      const next = await waiting;
      const grantedMs = performance.now() - forcedAt;
      await new Promise<void>((resolve) => {
        if (lock.signal.aborted) resolve();
        else lock.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      const abortedMs = performance.now() - forcedAt;
      const reason = lock.signal.reason as LockLostError;
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason.reason).toBe("revoked");
      expect(reason.detail).toBe("stuck on a dead socket");
      if (fenced()) expect(next.token).toBeGreaterThan(lock.token);
      console.log(
        `[baton conformance] ${ctx.target.name}: forced release: waiter granted after ${grantedMs.toFixed(0)} ms, holder aborted after ${abortedMs.toFixed(0)} ms (TTL ${ttl} ms)`,
      );
      // One renewal interval is a third of the TTL; slack for a loaded host.
      expect(abortedMs).toBeLessThan(ttl / 3 + 2_000);
      await next.release();
      expect(await lock.release()).toBe(false);
    });

    it("forceRelease(): a stale token frees nothing and the holder keeps its lock", async ({
      skip,
    }) => {
      if (forcing() === undefined) skip(`${ctx.target.name} declares no forced release`);
      if (!fenced()) skip(`${ctx.target.name} declares fencing "none": no token to name`);
      const a = ctx.coordinator();
      const name = ctx.name("ops-force-stale");
      const first = await a.acquire(name);
      const stale = first.token;
      await first.release();
      const second = await a.acquire(name);
      const result = await ctx.coordinator().forceRelease(name, { reason: "stale", token: stale });
      expect(result.released, show(result)).toBe(false);
      await delay(ttl / 2);
      expect(second.held).toBe(true);
      await second.release();
    });

    it("forceRelease(): rejects a missing or empty reason before any I/O", async ({ skip }) => {
      if (forcing() === undefined) skip(`${ctx.target.name} declares no forced release`);
      const a = ctx.coordinator();
      const name = ctx.name("ops-force-input");
      await expect(
        a.forceRelease(name, {} as unknown as { reason: string }),
      ).rejects.toBeInstanceOf(ConfigError);
      await expect(a.forceRelease(name, { reason: "" })).rejects.toBeInstanceOf(ConfigError);
    });

    it("holders in worker processes: list() shows the holder, the waiter and the job; a forced release revokes the holder in its process, its fenced write is rejected, the waiter holds within 1 s", async ({
      skip,
    }) => {
      if (url === undefined) skip(`${ctx.target.name}: no worker processes (not cross-process)`);
      if (!inspection()) skip(`${ctx.target.name} declares no inspection`);
      if (forcing() === undefined) skip(`${ctx.target.name} declares no forced release`);
      const records = ctx.backend.guarantees.records;
      const spawned = await Promise.all(
        ["holder", "waiter", "runner"].map((role) =>
          spawnLockWorker({ url: (url as () => string)(), ttlMs: ttl, ownerId: `ops-${role}` }),
        ),
      );
      workers.push(...spawned);
      const [holder, waiter, runner] = spawned as [LockWorker, LockWorker, LockWorker];
      const prefix = ctx.name("ops-procs/");
      const name = `${prefix}invoices`;
      const job = `${prefix}nightly`;
      const got = (await holder.request(
        { op: "acquire", name, waitMs: 20_000 },
        (e) => e.event === "acquired",
        30_000,
      )) as Acquired;
      waiter.send({ op: "acquire", name, waitMs: 30_000 });
      if (records) {
        runner.send({ op: "run-once", job, slot: "2026-12-01T02:00:00Z", holdMs: 60_000 });
        await runner.waitFor((e) => e.event === "job-started", 20_000);
      }
      const operator = ctx.coordinator();
      const view = await inspectUntil(
        operator,
        name,
        (v) => v !== null && (v.waiters === undefined || v.waiters.count >= 1),
        10_000,
      );
      // Some stores list a lock from its holder's first renewal on (a third of the TTL).
      const listedFrom = performance.now();
      let items = await listAll(operator, prefix);
      while (!items.some((i) => i.name === name) && performance.now() - listedFrom < ttl + 10_000) {
        await delay(100);
        items = await listAll(operator, prefix);
      }
      const lock = items.find((i) => i.name === name);
      expect(lock?.kind, show(items)).toBe("lock");
      expect(lock?.holders.map((h) => h.ownerId)).toEqual(["ops-holder"]);
      if (fenced()) expect(`${lock?.holders[0]?.token}`).toBe(got.token);
      const left = lock?.holders[0]?.remainingMs;
      if (left !== undefined) expect(left).toBeLessThanOrEqual(ttl);
      if (view?.waiters?.ownerIds !== undefined)
        expect(view.waiters.ownerIds).toContain("ops-waiter");
      if (records) {
        const jobView = items.find((i) => i.name === job);
        expect(jobView?.kind, show(items)).toBe("job");
        expect(jobView?.slots?.[0]?.record.state).toBe("running");
        expect(jobView?.holders.map((h) => h.ownerId)).toEqual(["ops-runner"]);
      }

      // The operator frees the lock; the holder is told in its own process.
      const fence = new MemoryFence();
      if (fenced()) await fence.raise(name, BigInt(got.token));
      const holderFrom = holder.events.length;
      const waiterFrom = waiter.events.length;
      const forcedAt = performance.now();
      const result = await operator.forceRelease(name, { reason: "holder stuck" });
      expect(result.released).toBe(true);
      const granted = (await waiter.waitFor(
        (e) => e.event === "acquired",
        10_000,
        waiterFrom,
      )) as Acquired;
      const grantedMs = performance.now() - forcedAt;
      const lost = (await holder.waitFor(
        (e) => e.event === "lost",
        ttl + 10_000,
        holderFrom,
      )) as Lost;
      const revokedMs = performance.now() - forcedAt;
      console.log(
        `[baton conformance] ${ctx.target.name}: forced release across processes: waiter granted after ${grantedMs.toFixed(0)} ms, holder revoked after ${revokedMs.toFixed(0)} ms (TTL ${ttl} ms)`,
      );
      expect(lost.reason).toBe("revoked");
      expect(lost.detail).toBe("holder stuck");
      // A freed grant goes to the waiter at once; otherwise the holder's next renewal frees it.
      // Generous bounds: the waiter is another process, on a loaded 2-core machine.
      expect(grantedMs).toBeLessThan(forcing() === "grant" ? 2_000 : ttl / 3 + 2_000);
      expect(revokedMs).toBeLessThan(ttl / 3 + 2_000);
      if (fenced()) {
        expect(BigInt(granted.token)).toBeGreaterThan(BigInt(got.token));
        // The next holder raises the fence; the old holder's late write is rejected.
        await fence.raise(name, BigInt(granted.token));
        await expect(fence.write(name, BigInt(got.token), () => {})).rejects.toBeInstanceOf(
          StaleTokenError,
        );
      }
    }, 90_000);
  });
}
