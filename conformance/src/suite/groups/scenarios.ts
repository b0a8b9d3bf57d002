import { randomUUID } from "node:crypto";
import {
  createCoordinator,
  type LockBackend,
  MemoryFence,
  parseBackendUrl,
  StaleTokenError,
} from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { proxyHosts } from "../../faults/proxy-hosts.js";
import { spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import { TcpProxy } from "../../faults/tcp-proxy.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { checkHistory, type Violation } from "../../history/check-history.js";
import { History } from "../../history/history.js";
import { RecordedCoordinator } from "../../history/recorded-coordinator.js";
import { recordedToken } from "../../history/recorded-token.js";
import { RecordedWorker, type WroteEvent } from "../../history/recorded-worker.js";
import { skipUnless } from "../skip-unless.js";
import { delay, type SuiteContext, settle } from "../suite-context.js";

type Fencing = "monotonic" | "single-node" | "none";

const isAcquired = (e: WorkerEvent) => e.event === "acquired";

/**
 * Fault scenarios, each recorded as a {@link History} (runner's monotonic clock)
 * and checked with {@link checkHistory}: zero violations where the backend declares a
 * guarantee, and at least one in the negative control (the same paused-holder workload with
 * plain writes instead of a fence), which proves the checker can see a violation at all.
 * Holders and waiters that get frozen run in worker processes; proxied clients run here.
 */
export function scenariosGroup(
  ctx: SuiteContext,
  url: () => string,
  declared: { fencing: Fencing },
): void {
  describe("fault scenarios (history checked)", () => {
    const cleanups: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });
    const fencing = declared.fencing !== "none";
    const ttl = ctx.target.ttlMs;
    /** Long enough for a frozen holder's lease to run out and a waiter to notice. */
    const takeoverBound = ttl * 4 + 10_000;

    const owner = (process: string) => `${process}-${randomUUID().slice(0, 6)}`;
    const worker = async (history: History, process: string, onWrite?: (e: WroteEvent) => void) => {
      const w = await spawnLockWorker({ url: url(), ttlMs: ttl, ownerId: owner(process) });
      cleanups.push(() => w.kill());
      return new RecordedWorker(history, process, w, onWrite ? { onWrite } : {});
    };
    /** A coordinator on the backend's URL, or on `at`: another URL or a backend instance. */
    const coordinator = (history: History, process: string, at: string | LockBackend = url()) => {
      const c = createCoordinator({
        ...(typeof at === "string" ? { url: at } : { backend: at }),
        ttlMs: ttl,
        ownerId: owner(process),
      });
      cleanups.push(() => c.close());
      return new RecordedCoordinator(history, process, c);
    };
    const observer = () => {
      const c = createCoordinator({ url: url(), ttlMs: ttl, ownerId: owner("observer") });
      cleanups.push(() => c.close());
      return c;
    };
    const expectClean = (history: History) => {
      const violations = checkHistory(history, { fencing });
      expect(
        violations.map((v) => v.message),
        `history:\n${history.describe()}`,
      ).toEqual([]);
    };

    /**
     * A holder writes without checking (every 20 ms, token attached), is frozen past its
     * TTL, another worker takes over and writes, then the frozen one thaws and writes on with
     * its old token. Writes go through a fence (`fenced`) or straight into a plain log.
     */
    const pausedHolder = async (fenced: boolean) => {
      const history = new History();
      const name = ctx.name(fenced ? "paused-holder-fenced" : "paused-holder-plain");
      const fence = new MemoryFence();
      const stored: string[] = [];
      const decisions: Promise<unknown>[] = [];
      const apply = (process: string) => (e: WroteEvent) => {
        const value = `${process}:${e.seq}`;
        const token = BigInt(e.token);
        if (!fenced) {
          stored.push(value);
          history.plainWrite(process, e.name, { token, value });
          return;
        }
        const write = history.invokeWrite(process, e.name, { token, fenced: true, value });
        decisions.push(
          fence
            .write(e.name, token, () => stored.push(value))
            .then(
              () => write.accepted(),
              (error: unknown) => {
                if (!(error instanceof StaleTokenError)) throw error;
                write.rejected();
              },
            ),
        );
      };
      const [old, next] = await Promise.all([
        worker(history, "old", apply("old")),
        worker(history, "next", apply("next")),
      ]);
      old.acquire(name);
      await old.worker.waitFor(isAcquired, 20_000);
      old.send({ op: "tick", name, everyMs: 20, unchecked: true });
      await old.worker.waitFor((e) => e.event === "wrote" && e.seq >= 2, 10_000);
      old.pause();
      const pausedAt = performance.now();
      const nextFrom = next.worker.events.length;
      next.acquire(name, { waitMs: takeoverBound });
      await next.worker.waitFor(isAcquired, takeoverBound, nextFrom);
      const takeoverMs = performance.now() - pausedAt;
      next.send({ op: "tick", name, everyMs: 20 });
      await next.worker.waitFor((e) => e.event === "wrote" && e.seq >= 2, 10_000, nextFrom);
      await Promise.all(decisions);
      const lastSeq = Math.max(...old.worker.events.map((e) => (e.event === "wrote" ? e.seq : -1)));
      const oldFrom = old.worker.events.length;
      old.resume();
      // It writes on after SIGCONT, before and after it notices the loss.
      await old.worker.waitFor((e) => e.event === "wrote" && e.seq >= lastSeq + 3, 10_000, oldFrom);
      await old.worker.waitFor((e) => e.event === "lost", 10_000, oldFrom);
      await old.kill();
      await Promise.all(decisions);
      history.read("runner", name, stored);
      const staleWrites = history.entries.filter(
        (e) => e.type === "write" && e.process === "old" && e.invokeAt > pausedAt + takeoverMs,
      );
      return { history, takeoverMs, staleWrites, violations: checkHistory(history, { fencing }) };
    };

    skipUnless(fencing, `${ctx.target.name} declares fencing "none"`, () => {
      it("paused holder past its TTL writing through a fence: the next holder takes over, every write after SIGCONT is rejected, no violation", async () => {
        const run = await pausedHolder(true);
        expect(run.takeoverMs).toBeLessThan(takeoverBound);
        expect(run.staleWrites.length).toBeGreaterThan(0);
        for (const w of run.staleWrites) expect(w).toMatchObject({ result: "rejected" });
        expect(
          run.violations.map((v) => v.message),
          `history:\n${run.history.describe()}`,
        ).toEqual([]);
      });
    });

    it("negative control: the same paused holder with plain writes; the checker finds the stale writes", async () => {
      const run = await pausedHolder(false);
      const found = run.violations.filter((v: Violation) => v.kind === "unfenced-write");
      console.info(
        `[baton scenarios] ${ctx.target.name}: negative control found ${run.violations.length} violation(s) (${found.length} unfenced writes) after a ${Math.round(run.takeoverMs)} ms takeover`,
      );
      expect(found.length, `history:\n${run.history.describe()}`).toBeGreaterThanOrEqual(1);
      for (const v of found) expect(v.message).toContain("by old");
    });

    it("paused waiter whose lease runs out while it is queued is never told it holds the lock", async () => {
      const history = new History();
      const name = ctx.name("paused-waiter");
      const holder = coordinator(history, "holder");
      const third = coordinator(history, "third");
      const waiter = await worker(history, "waiter");
      const held = await holder.acquire(name);
      waiter.acquire(name, { waitMs: 60_000 });
      await delay(500); // queued (FIFO backends: first in line)
      waiter.pause();
      const thirdWaits = third.acquire(name, { waitMs: takeoverBound });
      await delay(100);
      await holder.release(held);
      // FIFO backends hand the lock to the frozen waiter first; its lease has to run out.
      const lock = await thirdWaits;
      const from = waiter.worker.events.length;
      waiter.resume();
      await delay(Math.max(ttl * 1.5, 1_500));
      expect(waiter.worker.events.slice(from).filter(isAcquired)).toEqual([]);
      expect(lock.held).toBe(true);
      await third.release(lock);
      // Its wait goes on: now it may get the lock, legitimately.
      await waiter.worker.waitFor(
        (e) => isAcquired(e) || (e.event === "error" && e.op === "acquire"),
        takeoverBound,
        from,
      );
      expectClean(history);
    });

    it("release by an expired owner returns false and leaves the new holder's lock alone", async () => {
      const history = new History();
      const name = ctx.name("expired-release");
      const old = await worker(history, "old");
      const next = coordinator(history, "next");
      const watcher = observer();
      await watcher.holder(name); // connected long before it is asked below
      old.acquire(name);
      await old.worker.waitFor(isAcquired, 20_000);
      old.pause();
      const lock = await next.acquire(name, { waitMs: takeoverBound });
      const from = old.worker.events.length;
      old.release(name); // read by the worker the moment it thaws
      old.resume();
      const released = await old.worker.waitFor((e) => e.event === "released", 10_000, from);
      expect(released).toMatchObject({ wasHeld: false });
      expect(lock.held).toBe(true);
      expect(await watcher.holder(name)).toMatchObject({
        ownerId: next.coordinator.ownerId,
        token: recordedToken(lock),
      });
      expect(await watcher.tryAcquire(name)).toBeNull();
      expect(await next.release(lock)).toBe(true);
      expectClean(history);
    });

    /**
     * Where a proxied client connects (a URL through proxies, or the target's proxied backend)
     * and its proxies; or why that cannot work. Without the target's `proxiedBackend`: one
     * proxy per host of the URL. `firstHostOnly` (clusters, not Redlock): one proxy, to the
     * first host only, so a client that has been used once is connected to every host it will
     * use (a client connecting to another member through a proxy that drops replies never
     * finishes its handshake, and its request is never sent). A target's `proxiedBackend`
     * decides for itself which connections go through which proxy.
     */
    const proxied = async (
      options: { firstHostOnly?: boolean } = {},
    ): Promise<{ via: string | LockBackend; proxies: TcpProxy[] } | { skip: string }> => {
      const makeBackend = ctx.target.proxiedBackend?.bind(ctx.target);
      if (makeBackend !== undefined) {
        const proxies: TcpProxy[] = [];
        cleanups.push(() => Promise.all(proxies.map((p) => p.close())));
        const backend = await makeBackend(async (to) => {
          const p = await TcpProxy.start({ host: to.host, port: to.port });
          proxies.push(p);
          return { host: p.host, port: p.port };
        });
        cleanups.push(() => backend.close());
        if (proxies.length === 0)
          throw new Error(`${ctx.target.name}: proxiedBackend started no proxy`);
        return { via: backend, proxies };
      }
      const direct = url();
      const parsed = parseBackendUrl(direct);
      if (parsed.hosts.some((h) => h.port === undefined)) {
        return {
          skip: `${ctx.target.name}: the URL names no host:port to put a proxy in front of`,
        };
      }
      // Redlock needs every node; the members of one etcd or ZooKeeper cluster stand for it.
      const firstHostOnly = options.firstHostOnly === true && parsed.scheme !== "redlock";
      const px = await proxyHosts(direct, { firstHostOnly });
      cleanups.push(() => px.close());
      return { via: px.url, proxies: [...px.proxies] };
    };
    /** Skips the running test, with the reason printed. */
    const skipWith = (t: { skip: (note?: string) => never }, why: string): never => {
      console.warn(`[baton conformance] SKIPPED: ${why}`);
      return t.skip(why);
    };
    /** Proxied coordinators are closed with their links restored, so close() cannot hang. */
    const restoreLinks = (proxies: TcpProxy[]) =>
      cleanups.push(async () => {
        for (const p of proxies) p.forward();
      });

    it.for(["cut", "blackhole"] as const)(
      "link %s: the holder's signal aborts before anyone else gets the lock",
      async (fault, t) => {
        const px = await proxied();
        if ("skip" in px) return skipWith(t, px.skip);
        const history = new History();
        const name = ctx.name(`link-${fault}`);
        const holder = coordinator(history, "cut-off", px.via);
        const other = coordinator(history, "other");
        restoreLinks(px.proxies);
        const lock = await holder.acquire(name);
        await delay(ttl / 2); // a renewal through the proxies
        expect(lock.held).toBe(true);
        for (const p of px.proxies) p[fault]();
        const next = await other.acquire(name, { waitMs: takeoverBound });
        expect(lock.signal.aborted).toBe(true);
        expect(["deadline", "session-lost", "key-lost"]).toContain(lock.lostReason);
        expect(next.held).toBe(true);
        await other.release(next);
        expectClean(history);
      },
    );

    it("acquire replies delayed beyond the TTL never produce a lock", async (t) => {
      const px = await proxied();
      if ("skip" in px) return skipWith(t, px.skip);
      const history = new History();
      const name = ctx.name("late-reply");
      const slow = coordinator(history, "slow", px.via);
      const direct = coordinator(history, "direct");
      restoreLinks(px.proxies);
      // Connected, session open, and whatever the lock's first use sets up is set up.
      await slow.release(await slow.acquire(name));
      for (const p of px.proxies) p.delayReplies(ttl * 1.5);
      const slowTry = settle(slow.acquire(name, { waitMs: ttl * 3 }));
      await delay(50);
      const lock = await direct.acquire(name, { waitMs: takeoverBound });
      await delay(ttl / 2);
      expect(await direct.release(lock)).toBe(true);
      const outcome = await slowTry;
      if (outcome.ok) {
        throw new Error(
          `a lock (token ${outcome.value.token}, held=${outcome.value.held}) came from replies ${ttl * 1.5} ms late; history:\n${history.describe()}`,
        );
      }
      expect((outcome.error as Error).name).toMatch(/LockTimeoutError|BackendUnavailableError/);
      expectClean(history);
    });

    it("acquire reply dropped after the server granted: the orphan is gone within one TTL", async (t) => {
      const px = await proxied({ firstHostOnly: true });
      if ("skip" in px) return skipWith(t, px.skip);
      const history = new History();
      const name = ctx.name("dropped-reply");
      const deaf = coordinator(history, "deaf", px.via);
      const direct = coordinator(history, "direct");
      const watcher = observer();
      restoreLinks(px.proxies);
      // Connected, session open, and whatever the lock's first use sets up (ZooKeeper: the
      // parent node) is set up: the next acquire is the grant itself.
      await deaf.release(await deaf.acquire(name));
      await watcher.holder(name);
      for (const p of px.proxies) p.dropReplies();
      const askedAt = performance.now();
      const deafTry = settle(deaf.acquire(name, { waitMs: 0 }));
      // The store granted it: the orphan shows as the holder.
      let orphan = await watcher.holder(name);
      while (orphan === null && performance.now() - askedAt < ttl / 2) {
        await delay(20);
        orphan = await watcher.holder(name);
      }
      expect(orphan?.ownerId).toBe(deaf.coordinator.ownerId);
      const lock = await direct.acquire(name, { waitMs: takeoverBound });
      const goneAfterMs = performance.now() - askedAt;
      for (const p of px.proxies) p.forward(); // a session open still under way may finish
      console.info(
        `[baton scenarios] ${ctx.target.name}: orphan of a dropped reply gone after ${Math.round(goneAfterMs)} ms (TTL ${ttl} ms)`,
      );
      expect(goneAfterMs).toBeLessThan(ttl + 1_500);
      const outcome = await deafTry;
      expect(outcome.ok).toBe(false);
      expect(await direct.release(lock)).toBe(true);
      expectClean(history);
    });
  });
}
