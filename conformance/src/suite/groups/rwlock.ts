import { ConfigError, LockLostError, LockTimeoutError, type Permit } from "@baton/core";
import { describe, expect, it } from "vitest";
import { History, READ_SHARE, WRITE_SHARE } from "../../history/history.js";
import { RecordedCoordinator } from "../../history/recorded-coordinator.js";
import { writePermits } from "../permit-options.js";
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
 * Read-write locks (`coordinator.readWriteLock`): many readers or one writer, never a writer
 * beside anyone; write tokens strictly rising and reads carrying the newest write's; a waiting
 * writer not starved by readers; a downgrade that lets no writer in between; aborted waits
 * that leave nothing behind; dead and frozen holders freed within their TTL.
 */
export function rwlockGroup(ctx: SuiteContext, options: PermitGroupOptions): void {
  describe("read-write locks", () => {
    const ttl = ctx.target.ttlMs;
    const takeoverBound = ttl * 4 + 10_000;
    const tokensRise = options.fencing;

    it("many readers at once, from one coordinator too, or one writer alone; tryRead and tryWrite are null when they would not fit", async () => {
      const name = ctx.name("rw");
      const a = ctx.coordinator();
      const b = ctx.coordinator();
      const rwA = a.readWriteLock(name);
      const rwB = b.readWriteLock(name);
      expect(rwA.name).toBe(name);
      const reads = await Promise.all([rwA.read(), rwA.read({ value: "a2" }), rwB.read()]);
      for (const r of reads) {
        expect(r.held).toBe(true);
        expect(r.mode).toBe("read");
        expect(r.permits).toBe(1);
        // Before any write there is no write token to carry.
        if (tokensRise) expect(r.token).toBe(0n);
      }
      expect(await rwB.tryWrite()).toBeNull();
      const holders = await rwB.holders();
      expect(holders.map((h) => h.mode)).toEqual(["read", "read", "read"]);
      expect(holders.map((h) => h.permits)).toEqual([1, 1, 1]);
      expect(holders.map((h) => h.ownerId).sort()).toEqual(
        [a.ownerId, a.ownerId, b.ownerId].sort(),
      );
      await Promise.all(reads.map((r) => r.release()));
      const write = await rwB.tryWrite({ value: "writer" });
      expect(write?.mode).toBe("write");
      if (tokensRise) expect(write?.token).toBeGreaterThan(0n);
      expect(await rwA.tryRead()).toBeNull();
      expect(await rwA.tryWrite()).toBeNull();
      expect((await rwA.holders()).map((h) => [h.ownerId, h.mode, h.value])).toEqual([
        [b.ownerId, "write", "writer"],
      ]);
      await write?.release();
      expect(await rwA.holders()).toEqual([]);
    });

    skipUnless(tokensRise, `${ctx.target.name} declares fencing "none"`, () => {
      it("write tokens rise strictly; a read carries the newest write's token, also after the lock had no holders for a while", async () => {
        const name = ctx.name("rw-tokens");
        const a = ctx.coordinator().readWriteLock(name);
        const b = ctx.coordinator().readWriteLock(name);
        const tokens: bigint[] = [];
        for (let i = 0; i < 3; i++) {
          const w = await (i % 2 === 0 ? a : b).write();
          tokens.push(w.token);
          await w.release();
          const [r1, r2] = await Promise.all([a.read(), b.read()]);
          expect([r1?.token, r2?.token]).toEqual([w.token, w.token]);
          await Promise.all([r1?.release(), r2?.release()]);
        }
        for (let i = 1; i < tokens.length; i++) {
          expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as bigint);
        }
        // Nobody holds or waits; whatever the store keeps of the lock may be cleaned up.
        await delay(ttl * 1.5);
        const late = await b.read();
        expect(late.token).toBe(tokens.at(-1));
        await late.release();
        const next = await a.write();
        expect(next.token).toBeGreaterThan(tokens.at(-1) as bigint);
        await next.release();
      });
    });

    it("a waiting writer is not starved by a stream of readers", async () => {
      const name = ctx.name("rw-stream");
      const writer = ctx.coordinator().readWriteLock(name);
      const readers = [ctx.coordinator(), ctx.coordinator(), ctx.coordinator()];
      const { waitedMs, overtook } = await behindAStream(
        (i) => {
          const rw = readers[i % readers.length]?.readWriteLock(name);
          return rw && ((waitMs) => rw.read({ waitMs }));
        },
        () => writer.holders(),
        (waitMs) => writer.write({ waitMs }),
        takeoverBound,
      );
      console.info(
        `[baton conformance] ${ctx.target.name}: a writer waited ${Math.round(waitedMs)} ms behind a stream of readers (TTL ${ttl} ms)`,
      );
      expect(waitedMs).toBeLessThan(takeoverBound);
      if (options.fifo) expect(overtook).toEqual([]);
    });

    it("downgrade: the write becomes a read with its token, readers queued behind start, a waiting writer does not get in", async () => {
      const name = ctx.name("rw-downgrade");
      const a = ctx.coordinator();
      const rw = a.readWriteLock(name);
      const others = [ctx.coordinator(), ctx.coordinator(), ctx.coordinator(), ctx.coordinator()];
      const [r1c, r2c, w2c, probe] = others.map((c) => c.readWriteLock(name));
      if (r1c === undefined || r2c === undefined || w2c === undefined || probe === undefined) {
        throw new Error("unreachable");
      }
      const write = await rw.write();
      const queuedReads = [
        r1c.read({ waitMs: takeoverBound }),
        r2c.read({ waitMs: takeoverBound }),
      ];
      await delay(200);
      let secondWriter: Permit | undefined;
      const waitingWriter = w2c.write({ waitMs: takeoverBound }).then((w) => {
        secondWriter = w;
        return w;
      });
      await delay(200);
      expect(await probe.tryWrite()).toBeNull();
      const read = await write.downgrade();
      expect(read.mode).toBe("read");
      expect(read.permits).toBe(1);
      expect(read.held).toBe(true);
      expect(write.held).toBe(false);
      expect((write.signal.reason as LockLostError).reason).toBe("released");
      const started = performance.now();
      const [r1, r2] = await Promise.all(queuedReads);
      const admittedMs = performance.now() - started;
      console.info(
        `[baton conformance] ${ctx.target.name}: readers queued behind a downgraded write started after ${Math.round(admittedMs)} ms`,
      );
      expect(admittedMs).toBeLessThan(ttl * 2 + 5_000);
      if (tokensRise) {
        expect(read.token).toBe(write.token);
        expect([r1?.token, r2?.token]).toEqual([write.token, write.token]);
      }
      // The second writer still waits for every reader, the downgraded one among them.
      expect(secondWriter).toBeUndefined();
      expect(await probe.tryWrite()).toBeNull();
      expect((await probe.holders()).map((h) => h.mode)).toEqual(["read", "read", "read"]);
      await Promise.all([r1?.release(), r2?.release()]);
      await delay(200);
      expect(secondWriter).toBeUndefined();
      expect(await read.release()).toBe(true);
      const w2 = await waitingWriter;
      if (tokensRise) expect(w2.token).toBeGreaterThan(write.token);
      // Only a write can be downgraded, and only while held.
      await rejection(read.downgrade(), ConfigError);
      await w2.release();
      await rejection(w2.downgrade(), LockLostError);
    });

    it("an aborted or timed-out wait for the write lock leaves nothing behind: a read asked after it is not delayed", async () => {
      const name = ctx.name("rw-abort");
      const reader = await ctx.coordinator().readWriteLock(name).read();
      const writer = ctx.coordinator().readWriteLock(name);
      const probe = ctx.coordinator().readWriteLock(name);
      const controller = new AbortController();
      const waiting = settle(writer.write({ waitMs: 60_000, signal: controller.signal }));
      await delay(300);
      const reason = new Error("caller gave up");
      controller.abort(reason);
      const outcome = await waiting;
      expect(outcome.ok ? outcome.value : outcome.error).toBe(reason);
      // A writer left in the queue would hold this read back for good. (The call rejects at
      // once; the store may take a round trip to drop the writer's queue entry.)
      const settleMs = Math.max(ttl, 1_000);
      const read = await probe.read({ waitMs: settleMs });
      const timedOut = await rejection(writer.write({ waitMs: 400 }), LockTimeoutError);
      expect(timedOut.waitMs).toBe(400);
      const again = await probe.read({ waitMs: settleMs });
      await Promise.all([reader.release(), read.release(), again.release()]);
      expect(await probe.write({ waitMs: settleMs })).toMatchObject({ mode: "write" });
    });

    it("withRead and withWrite run fn under the lock, return its result and release; a lock lost while fn ran is reported", async () => {
      const name = ctx.name("rw-with");
      const rw = ctx.coordinator().readWriteLock(name);
      const probe = ctx.coordinator().readWriteLock(name);
      const read = await rw.withRead(async ({ lock }) => {
        expect((lock as Permit).mode).toBe("read");
        expect(await probe.tryWrite()).toBeNull();
        const other = await probe.tryRead();
        await other?.release();
        return other !== null;
      });
      expect(read).toBe(true);
      const wrote = await rw.withWrite(async ({ lock, signal }) => {
        expect((lock as Permit).mode).toBe("write");
        expect(signal.aborted).toBe(false);
        expect(await probe.tryRead()).toBeNull();
        return "wrote";
      });
      expect(wrote).toBe("wrote");
      expect(await probe.holders()).toEqual([]);

      await expectLossReported(ctx, takeoverBound, (c, fn) => c.readWriteLock(name).withWrite(fn));
    });

    it("5 coordinators reading and writing: never a writer beside anyone, each read carries the newest write's token (history checked)", async () => {
      const name = ctx.name("rw-contention");
      const history = new History();
      let readers = 0;
      let writers = 0;
      let mostReaders = 0;
      let newestWrite = 0n;
      const overlaps: string[] = [];
      const run = async (i: number) => {
        const c = new RecordedCoordinator(history, `c${i}`, ctx.coordinator({ ownerId: `c${i}` }));
        const rw = c.coordinator.readWriteLock(name);
        for (let k = 0; k < 10; k++) {
          if ((i + k) % 4 === 0) {
            const w = await c.write(rw, { waitMs: 60_000 });
            writers++;
            if (writers > 1 || readers > 0) overlaps.push(`write ${w.token} beside others`);
            if (tokensRise) newestWrite = w.token;
            await delay(2 + (k % 3));
            writers--;
            await c.release(w);
          } else {
            const r = await c.read(rw, { waitMs: 60_000 });
            readers++;
            mostReaders = Math.max(mostReaders, readers);
            if (writers > 0) overlaps.push(`read ${r.token} beside a writer`);
            if (tokensRise && r.token !== newestWrite) {
              overlaps.push(`read carries ${r.token}, the newest write's is ${newestWrite}`);
            }
            await delay(2 + (k % 3));
            readers--;
            await c.release(r);
          }
        }
        c.detach();
      };
      await Promise.all(Array.from({ length: 5 }, (_, i) => run(i)));
      expect(overlaps).toEqual([]);
      expect(mostReaders).toBeGreaterThan(1);
      expectHistoryPasses(history, tokensRise);
    });

    it("a writer that stops renewing is freed within its TTL; the read after carries its token", async () => {
      const name = ctx.name("rw-dead");
      const grant = await ctx.frozenPermitHolder(name, writePermits());
      const rw = ctx.coordinator().readWriteLock(name);
      expect(await rw.tryRead()).toBeNull();
      const started = performance.now();
      const read = await rw.read({ waitMs: takeoverBound });
      const waited = performance.now() - started;
      console.info(
        `[baton conformance] ${ctx.target.name}: a frozen writer was gone after ${Math.round(waited)} ms (TTL ${ttl} ms)`,
      );
      expect(waited).toBeLessThan(takeoverBound);
      if (tokensRise) expect(read.token).toBe(grant.token);
      await read.release();
    });

    describeWorkerHolders(ctx, options.workers, (spawnWorker) => {
      it("SIGSTOP of a writer: readers get in after its TTL with its token, its signal aborts on SIGCONT; SIGKILL of a reader: a writer gets in after its TTL (history checked)", async () => {
        const name = ctx.name("rw-workers");
        const history = new History();
        const spawn = (process: string) => spawnWorker(history, process);
        const [stopped, killed] = await Promise.all([spawn("stopped"), spawn("killed")]);
        const local = new RecordedCoordinator(history, "local", ctx.coordinator());
        const rw = local.coordinator.readWriteLock(name);

        stopped.acquirePermits(name, WRITE_SHARE, "w1");
        const w1 = await stopped.worker.waitFor(acquiredHold("w1"), 20_000);
        stopped.pause();
        let started = performance.now();
        const read = await local.read(rw, { waitMs: takeoverBound });
        const readWaited = performance.now() - started;
        if (tokensRise) expect(read.token).toBe(BigInt(w1.token));
        const from = stopped.worker.events.length;
        stopped.resume();
        await stopped.worker.waitFor(lostHold("w1"), 10_000, from);

        killed.acquirePermits(name, READ_SHARE, "r1");
        const r1 = await killed.worker.waitFor(acquiredHold("r1"), 20_000);
        if (tokensRise) expect(BigInt(r1.token)).toBe(BigInt(w1.token));
        await local.release(read);
        await killed.kill();
        started = performance.now();
        const write = await local.write(rw, { waitMs: takeoverBound });
        const writeWaited = performance.now() - started;
        if (tokensRise) expect(write.token).toBeGreaterThan(BigInt(w1.token));
        await local.release(write);
        local.detach();
        console.info(
          `[baton conformance] ${ctx.target.name}: a SIGSTOPped writer was gone after ${Math.round(readWaited)} ms, a SIGKILLed reader after ${Math.round(writeWaited)} ms (TTL ${ttl} ms)`,
        );
        expect(readWaited).toBeLessThan(takeoverBound);
        expect(writeWaited).toBeLessThan(takeoverBound);
        expectHistoryPasses(history, tokensRise);
        // The control: counted as held beyond the pause and the kill, the workers' holds
        // overlap the local ones, and the checker sees it.
        expectControlCaught(history, tokensRise, 2);
      });
    });
  });
}
