import {
  ConfigError,
  createCoordinator,
  LockHeldError,
  LockTimeoutError,
  MAX_PERMITS,
  type Permit,
  PermitLimitError,
} from "@baton/core";
import { describe, expect, it } from "vitest";
import { History } from "../../history/history.js";
import { RecordedCoordinator } from "../../history/recorded-coordinator.js";
import { countingBackend } from "../counting-backend.js";
import { semaphorePermits } from "../permit-options.js";
import { skipUnless } from "../skip-unless.js";
import { delay, type SuiteContext, settle } from "../suite-context.js";
import {
  acquiredHold,
  behindAStream,
  describeWorkerHolders,
  expectControlCaught,
  expectHistoryPasses,
  expectLossReported,
  lostHold,
  type PermitGroupOptions,
  rejection,
} from "./permit-support.js";

/**
 * Semaphores (`coordinator.semaphore`): never more than its permits held at once, tokens
 * strictly rising per grant, no request overtaken by later smaller ones (in queue order where
 * the backend is FIFO), dead and frozen holders' permits freed within their TTL, aborted waits
 * that leave nothing behind, a mismatched `permits` refused, bad input refused before I/O.
 */
export function semaphoreGroup(ctx: SuiteContext, options: PermitGroupOptions): void {
  describe("semaphores", () => {
    const ttl = ctx.target.ttlMs;
    /** Long enough for a dead or frozen holder's lease to run out and a waiter to notice. */
    const takeoverBound = ttl * 4 + 10_000;
    const tokensRise = options.fencing;
    /**
     * How long the next acquirer may wait after a wait was given up: the call rejects at
     * once, and the store may take a round trip to drop its queue entry.
     */
    const settleMs = Math.max(ttl, 1_000);

    it("holds up to its permits at once, many from one coordinator; not one more; holders() lists them in grant order", async () => {
      const name = ctx.name("sem");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const sem = a.semaphore(name, { permits: 3 });
      expect(sem.permits).toBe(3);
      const first = await sem.acquire({ value: "first" });
      // Two more at once from the same coordinator: no in-process queue in between.
      const more = await Promise.all([sem.acquire({ waitMs: 5_000 }), sem.acquire()]);
      const held = [first, ...more];
      for (const p of held) {
        expect(p.held).toBe(true);
        expect(p.mode).toBe("permit");
        expect(p.permits).toBe(1);
        expect(p.name).toBe(name);
      }
      const other = b.semaphore(name, { permits: 3 });
      expect(await other.tryAcquire()).toBeNull();
      const holders = await other.holders();
      expect(holders.map((h) => [h.ownerId, h.permits, h.mode])).toEqual([
        [a.ownerId, 1, "permit"],
        [a.ownerId, 1, "permit"],
        [a.ownerId, 1, "permit"],
      ]);
      expect(holders[0]?.value).toBe("first");
      if (tokensRise) {
        const tokens = held.map((p) => p.token);
        expect(new Set(tokens).size).toBe(3);
        for (const p of more) expect(p.token).toBeGreaterThan(first.token);
        // Grant order is token order.
        const listed = holders.map((h) => h.token);
        expect(listed).toEqual([...listed].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
        expect(new Set(listed)).toEqual(new Set(tokens));
      }
      expect(await first.release()).toBe(true);
      const next = await other.tryAcquire();
      expect(next).not.toBeNull();
      if (tokensRise) for (const p of held) expect(next?.token).toBeGreaterThan(p.token);
      expect(await other.tryAcquire({ permits: 2 })).toBeNull();
      await Promise.all([...more, next as Permit].map((p) => p.release()));
      expect(await other.holders()).toEqual([]);
      const all = await other.tryAcquire({ permits: 3 });
      expect(all?.permits).toBe(3);
      expect((await other.holders()).map((h) => h.permits)).toEqual([3]);
    });

    it("not enough free: tryAcquire is null, waitMs 0 a LockHeldError, a wait that runs out a LockTimeoutError", async () => {
      const name = ctx.name("sem-busy");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const held = await a.semaphore(name, { permits: 3 }).acquire({ permits: 2 });
      const sem = b.semaphore(name, { permits: 3 });
      expect(await sem.tryAcquire({ permits: 2 })).toBeNull();
      await rejection(sem.acquire({ permits: 2, waitMs: 0 }), LockHeldError);
      const started = performance.now();
      const timeout = await rejection(sem.acquire({ permits: 3, waitMs: 400 }), LockTimeoutError);
      expect(timeout.waitMs).toBe(400);
      expect(performance.now() - started).toBeGreaterThanOrEqual(350);
      // The one free permit is still free: nothing of the failed requests stayed behind (a
      // request left in the queue ahead would hold this one back for good).
      const one = await sem.acquire({ waitMs: settleMs });
      expect(one.permits).toBe(1);
      await Promise.all([held.release(), one.release()]);
    });

    it("an aborted wait rejects with the signal's reason and leaves nothing behind: the next acquirer is not delayed", async () => {
      const name = ctx.name("sem-abort");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const c = ctx.coordinator();
      const held = await a.semaphore(name, { permits: 3 }).acquire({ permits: 2 });
      const controller = new AbortController();
      const waiting = settle(
        b
          .semaphore(name, { permits: 3 })
          .acquire({ permits: 3, waitMs: 60_000, signal: controller.signal }),
      );
      await delay(300);
      // holders() lists what is granted, not who waits.
      expect((await c.semaphore(name, { permits: 3 }).holders()).map((h) => h.ownerId)).toEqual([
        a.ownerId,
      ]);
      const reason = new Error("caller gave up");
      controller.abort(reason);
      const outcome = await waiting;
      expect(outcome.ok ? outcome.value : outcome.error).toBe(reason);
      // A 3-permit waiter left in the queue would hold this one back for good.
      const next = await c.semaphore(name, { permits: 3 }).acquire({ waitMs: settleMs });
      await Promise.all([held.release(), next.release()]);
    });

    it("a number of permits other than the one its holders use is a PermitLimitError that leaves nothing behind", async () => {
      const name = ctx.name("sem-limit");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const held = await a.semaphore(name, { permits: 3 }).acquire();
      const wrong = b.semaphore(name, { permits: 5 });
      const error = await rejection(wrong.acquire({ waitMs: 5_000 }), PermitLimitError);
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe("permits");
      expect([error.stored, error.requested]).toEqual([3, 5]);
      await rejection(wrong.tryAcquire(), PermitLimitError);
      // A read-write lock of the name asks for another limit too.
      await rejection(b.readWriteLock(name).tryRead(), PermitLimitError);
      const right = b.semaphore(name, { permits: 3 });
      const two = await right.tryAcquire({ permits: 2 });
      expect(two).not.toBeNull();
      expect((await right.holders()).map((h) => h.permits)).toEqual([1, 2]);
      await Promise.all([held.release(), two?.release()]);
      // Once nobody holds or waits, the store forgets the number.
      const five = await wrong.acquire({ permits: 5, waitMs: 5_000 });
      expect(five.permits).toBe(5);
      await five.release();
    });

    it("bad permits, names and options are a ConfigError before any I/O", async () => {
      const { backend, opened } = countingBackend(ctx.backend);
      const c = createCoordinator({ backend, ttlMs: ttl });
      const syncConfig = (fn: () => unknown, field: string) => {
        let thrown: unknown;
        try {
          fn();
        } catch (error) {
          thrown = error;
        }
        expect(thrown, `${field}: no error`).toBeInstanceOf(ConfigError);
        expect((thrown as ConfigError).field).toBe(field);
      };
      const asyncConfig = async (promise: Promise<unknown>, field: string) => {
        const error = await rejection(promise, ConfigError);
        expect(error.field).toBe(field);
      };
      try {
        const name = ctx.name("sem-bad");
        for (const permits of [0, -1, 1.5, Number.NaN, MAX_PERMITS + 1, "3", undefined]) {
          syncConfig(() => c.semaphore(name, { permits: permits as number }), "permits");
        }
        syncConfig(() => c.semaphore(name, undefined as unknown as { permits: number }), "permits");
        syncConfig(() => c.semaphore(name, null as unknown as { permits: number }), "options");
        syncConfig(
          () => c.semaphore(name, { permits: 2, limit: 2 } as { permits: number }),
          "options.limit",
        );
        syncConfig(() => c.semaphore("", { permits: 2 }), "name");
        syncConfig(() => c.semaphore("bad\nname", { permits: 2 }), "name");
        syncConfig(() => c.readWriteLock(""), "name");
        expect(c.semaphore(name, { permits: MAX_PERMITS }).permits).toBe(MAX_PERMITS);
        const sem = c.semaphore(name, { permits: 3 });
        for (const permits of [0, -1, 4, 1.5, Number.NaN, "1"]) {
          await asyncConfig(sem.acquire({ permits: permits as number }), "permits");
          await asyncConfig(sem.tryAcquire({ permits: permits as number }), "permits");
          await asyncConfig(
            sem.withPermit(() => 1, { permits: permits as number }),
            "permits",
          );
        }
        await asyncConfig(sem.acquire({ waitMs: -1 }), "waitMs");
        await asyncConfig(sem.acquire({ ttlMs: 0 }), "ttlMs");
        await asyncConfig(sem.withPermit(42 as unknown as () => number), "fn");
        const rw = c.readWriteLock(name);
        await asyncConfig(rw.read({ waitMs: -1 }), "waitMs");
        await asyncConfig(rw.write({ ttlMs: 1.5 }), "ttlMs");
        await asyncConfig(rw.withRead(42 as unknown as () => number), "fn");
        await asyncConfig(rw.withWrite(42 as unknown as () => number), "fn");
        expect(opened()).toBe(0);
      } finally {
        await c.close();
      }
    });

    it("withPermit runs fn holding the permits, returns its result and releases; permits lost while fn ran are reported", async () => {
      const name = ctx.name("sem-with");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const sem = a.semaphore(name, { permits: 2 });
      const other = b.semaphore(name, { permits: 2 });
      const result = await sem.withPermit(
        async ({ signal, lock }) => {
          expect(signal.aborted).toBe(false);
          expect((lock as Permit).permits).toBe(2);
          expect(await other.tryAcquire()).toBeNull();
          return "done";
        },
        { permits: 2 },
      );
      expect(result).toBe("done");
      expect(await b.semaphore(name, { permits: 2 }).holders()).toEqual([]);
      const boom = new Error("job failed");
      await expect(
        sem.withPermit(() => {
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await other.holders()).toEqual([]);

      await expectLossReported(ctx, takeoverBound, (c, fn) =>
        c.semaphore(name, { permits: 2 }).withPermit(fn),
      );
    });

    it("a multi-permit request is not overtaken by a stream of single-permit ones", async () => {
      const name = ctx.name("sem-stream");
      const big = ctx.coordinator();
      const streams = [ctx.coordinator(), ctx.coordinator(), ctx.coordinator()];
      // The stream: each loop holds 1 permit for a while, then asks again; together they keep
      // at least one permit held all the time, so 3 are free only if the stream lets them be.
      const { waitedMs, overtook } = await behindAStream(
        (i) => {
          const sem = streams[i % streams.length]?.semaphore(name, { permits: 3 });
          return sem && ((waitMs) => sem.acquire({ waitMs }));
        },
        () => big.semaphore(name, { permits: 3 }).holders(),
        (waitMs) => big.semaphore(name, { permits: 3 }).acquire({ permits: 3, waitMs }),
        takeoverBound,
      );
      console.info(
        `[baton conformance] ${ctx.target.name}: a 3-permit request waited ${Math.round(waitedMs)} ms behind a stream of 1-permit requests (TTL ${ttl} ms)`,
      );
      expect(waitedMs).toBeLessThan(takeoverBound);
      // Where waiters are served in order, no single-permit request asked well after it was
      // granted before it.
      if (options.fifo) expect(overtook).toEqual([]);
    });

    skipUnless(options.fifo, `${ctx.target.name} does not declare FIFO waiting`, () => {
      it("queued requests are granted in the order they queued, whatever permits each asks for", async () => {
        const name = ctx.name("sem-fifo");
        const holder = ctx.coordinator();
        const first = await holder.semaphore(name, { permits: 3 }).acquire({ permits: 3 });
        // No two neighbours fit in 3 at once, so each is granted alone and in turn.
        const asks = [1, 3, 1, 3, 2];
        const order: number[] = [];
        const waiters: Promise<void>[] = [];
        const sems = asks.map((_, i) =>
          ctx.coordinator({ ownerId: `waiter-${i}` }).semaphore(name, { permits: 3 }),
        );
        // Sessions open before anyone queues: each request reaches the queue in a round trip.
        await Promise.all(sems.map((sem) => sem.holders()));
        for (const [i, permits] of asks.entries()) {
          const sem = sems[i];
          if (sem === undefined) continue;
          waiters.push(
            sem.withPermit(
              async () => {
                order.push(i);
                await delay(20);
              },
              { permits, waitMs: 60_000 },
            ),
          );
          // Let this waiter reach the store's queue before the next one starts.
          await delay(150);
        }
        await first.release();
        await Promise.all(waiters);
        expect(order).toEqual([0, 1, 2, 3, 4]);
      });
    });

    it("6 contenders taking 1 or 2 of 3 permits never hold more than 3 at once (history checked)", async () => {
      const name = ctx.name("sem-contention");
      const history = new History();
      let inUse = 0;
      let most = 0;
      const run = async (i: number) => {
        const c = new RecordedCoordinator(history, `c${i}`, ctx.coordinator({ ownerId: `c${i}` }));
        const sem = c.coordinator.semaphore(name, { permits: 3 });
        for (let k = 0; k < 12; k++) {
          const permits = (i + k) % 3 === 0 ? 2 : 1;
          const permit = await c.acquirePermits(sem, { permits, waitMs: 60_000 });
          inUse += permits;
          most = Math.max(most, inUse);
          await delay(2 + (k % 4));
          inUse -= permits;
          await c.release(permit);
        }
        c.detach();
      };
      await Promise.all(Array.from({ length: 6 }, (_, i) => run(i)));
      expect(most).toBeLessThanOrEqual(3);
      expect(most).toBeGreaterThan(1);
      expectHistoryPasses(history, tokensRise);
    });

    it("a holder that stops renewing has its permits freed within its TTL; the next grant's token is greater", async () => {
      const name = ctx.name("sem-dead");
      const grant = await ctx.frozenPermitHolder(name, semaphorePermits(2, 2));
      const sem = ctx.coordinator().semaphore(name, { permits: 2 });
      expect(await sem.tryAcquire()).toBeNull();
      const started = performance.now();
      const permit = await sem.acquire({ permits: 2, waitMs: takeoverBound });
      const waited = performance.now() - started;
      console.info(
        `[baton conformance] ${ctx.target.name}: a frozen holder's permits were free after ${Math.round(waited)} ms (TTL ${ttl} ms)`,
      );
      expect(waited).toBeLessThan(takeoverBound);
      if (tokensRise) expect(permit.token).toBeGreaterThan(grant.token);
      await permit.release();
    });

    describeWorkerHolders(ctx, options.workers, (spawnWorker) => {
      it("SIGKILL and SIGSTOP of permit holders: a waiter gets their permits after their TTL, the frozen one's signal aborts on SIGCONT, never more than the permits at once (history checked)", async () => {
        const name = ctx.name("sem-workers");
        const history = new History();
        const spawn = (process: string) => spawnWorker(history, process);
        const [killed, stopped] = await Promise.all([spawn("killed"), spawn("stopped")]);
        const share = { permits: 1, limit: 3, mode: "permit" as const };
        killed.acquirePermits(name, share, "k1");
        stopped.acquirePermits(name, share, "s1");
        const [k1, s1] = await Promise.all([
          killed.worker.waitFor(acquiredHold("k1"), 20_000),
          stopped.worker.waitFor(acquiredHold("s1"), 20_000),
        ]);
        const waiter = new RecordedCoordinator(history, "waiter", ctx.coordinator());
        const sem = waiter.coordinator.semaphore(name, { permits: 3 });
        // The third permit is free, and only that one.
        const third = await waiter.tryAcquirePermits(sem);
        expect(third).not.toBeNull();
        expect(await waiter.tryAcquirePermits(sem)).toBeNull();
        if (third !== null) await waiter.release(third);
        await killed.kill();
        stopped.pause();
        const started = performance.now();
        const all = await waiter.acquirePermits(sem, { permits: 3, waitMs: takeoverBound });
        const waited = performance.now() - started;
        console.info(
          `[baton conformance] ${ctx.target.name}: permits of a SIGKILLed and a SIGSTOPped holder were free after ${Math.round(waited)} ms (TTL ${ttl} ms)`,
        );
        expect(waited).toBeLessThan(takeoverBound);
        if (tokensRise) {
          expect(all.token).toBeGreaterThan(BigInt(k1.token));
          expect(all.token).toBeGreaterThan(BigInt(s1.token));
        }
        const from = stopped.worker.events.length;
        stopped.resume();
        await stopped.worker.waitFor(lostHold("s1"), 10_000, from);
        stopped.releasePermits(name, "s1");
        const released = await stopped.worker.waitFor(
          (e) => e.event === "permits-released",
          10_000,
          from,
        );
        expect(released).toMatchObject({ wasHeld: false });
        expect(all.held).toBe(true);
        await waiter.release(all);
        waiter.detach();
        expectHistoryPasses(history, tokensRise);
        // The control: counted as held beyond the kill and the pause, the workers' permits
        // overlap the waiter's, and the checker sees it.
        expectControlCaught(history, tokensRise, 1);
      });
    });
  });
}

/** A backend whose guarantees declare `semaphores: false` refuses them with a `ConfigError`. */
export function noSemaphoresGroup(ctx: SuiteContext): void {
  describe("without semaphores", () => {
    it("semaphore() and readWriteLock() are a ConfigError, as declared", async () => {
      const c = ctx.coordinator();
      const name = ctx.name("no-sem");
      const refused = async (use: () => Promise<unknown>) => {
        const outcome = await settle((async () => await use())());
        expect(outcome.ok ? outcome.value : outcome.error).toBeInstanceOf(ConfigError);
        if (!outcome.ok) expect((outcome.error as Error).message).toMatch(/semaphores/);
      };
      await refused(() => c.semaphore(name, { permits: 2 }).acquire());
      await refused(() => c.readWriteLock(name).read());
    });
  });
}
