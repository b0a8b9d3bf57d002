import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock } from "@baton/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockKeys, RedisBackend } from "../src/index.js";

/** Small seeded PRNG (mulberry32), so a run's choices can be replayed with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One hold as the test saw it: from the grant (acquire resolved) to the release call. */
interface Hold {
  readonly worker: number;
  readonly token: bigint;
  readonly start: number;
  end: number;
}

/** A grant a release handed to a wait, as announced on the wait's turn channel. */
interface Handoff {
  readonly at: number;
  readonly channel: string;
  readonly waitNo: string;
  readonly token: bigint;
}

const WORKERS = 8;
const TTLS = [1_000, 1_500];
const MAX_TTL = Math.max(...TTLS);
const CHURN_MS = 6_000;
/** On a busy host the churn runs on until it has made enough grants to mean something. */
const CHURN_MAX_MS = 20_000;
const ENOUGH_HOLDS = 200;
const ENOUGH_HANDOFFS = 50;

describeBackend("redis", (url) => {
  describe("redis line under churn", () => {
    const id = randomUUID().slice(0, 8);
    const prefix = `stress-${id}:`;
    const name = "churn";
    const keys = lockKeys(prefix, name);
    let clients: Redis[] = [];
    let backends: RedisBackend[] = [];
    let raw: Redis;
    let monitor: Redis;

    beforeAll(async () => {
      // Two clients and two backends: like two processes, each with its own subscriber.
      clients = [new Redis(url, { lazyConnect: true }), new Redis(url, { lazyConnect: true })];
      raw = new Redis(url, { lazyConnect: true });
      monitor = new Redis(url, { lazyConnect: true });
      await Promise.all([...clients, raw, monitor].map((c) => c.connect()));
      backends = clients.map((client) => new RedisBackend({ client, keyPrefix: prefix }));
    });
    afterAll(async () => {
      await Promise.allSettled(backends.map((b) => b.close()));
      for (const c of [...clients, raw, monitor]) c.disconnect();
    });

    it("keeps one holder, rising tokens and a moving line while waits abort, time out and sessions close", async () => {
      const seed = Number(process.env.BATON_STRESS_SEED ?? Math.floor(Math.random() * 2 ** 31));
      const random = prng(seed);
      const between = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));

      // Every handoff, from outside: the grant messages on all turn channels of the lock.
      const handoffs: Handoff[] = [];
      monitor.on("pmessage", (_pattern: string, channel: string, message: string) => {
        if (!message.startsWith("g")) return;
        const colon = message.indexOf(":");
        handoffs.push({
          at: performance.now(),
          channel,
          waitNo: message.slice(1, colon),
          token: BigInt(message.slice(colon + 1)),
        });
      });
      await monitor.psubscribe(`${keys.turnPrefix}*`);

      const holds: Hold[] = [];
      const violations: string[] = [];
      const lost: string[] = [];
      const outcomes = new Map<string, number>();
      const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
      /** Times at which no waiting acquire was in flight (liveness only counts while some is). */
      const noWaiterAt: number[] = [];
      let waitingNow = 0;
      let holding = 0;
      let current: { hold: Hold; lock: Lock } | undefined;
      let lastToken = 0n;
      let stop = false;
      const t0 = performance.now();

      interface Slot {
        coordinator: Coordinator;
        /** close() was called on this slot's coordinator (its grants from then are not counted). */
        closing: boolean;
        holding: boolean;
        generation: number;
      }
      const open = (i: number, generation: number): Slot => ({
        coordinator: createCoordinator({
          backend: backends[i % backends.length] as RedisBackend,
          closeBackend: false,
          ttlMs: TTLS[i % TTLS.length] as number,
          ownerId: `w${i}g${generation}`,
        }),
        closing: false,
        holding: false,
        generation,
      });
      const slots: Slot[] = Array.from({ length: WORKERS }, (_, i) => open(i, 0));

      const onGrant = (i: number, slot: Slot, lock: Lock): Hold | undefined => {
        if (slot.closing) {
          // close() began before this grant reached us: close releases it; not a hold.
          count("granted-while-closing");
          return undefined;
        }
        const now = performance.now() - t0;
        holding++;
        if (holding > 1) {
          violations.push(
            `overlap at ${now.toFixed(1)} ms: worker ${i} got token ${lock.token} while worker ${current?.hold.worker} holds token ${current?.hold.token} (held since ${current?.hold.start.toFixed(1)} ms, still held: ${current?.lock.held})`,
          );
        }
        if (lock.token <= lastToken) {
          violations.push(
            `token ${lock.token} granted to worker ${i} at ${now.toFixed(1)} ms after token ${lastToken}`,
          );
        }
        lastToken = lock.token;
        const hold: Hold = { worker: i, token: lock.token, start: now, end: Number.NaN };
        holds.push(hold);
        current = { hold, lock };
        slot.holding = true;
        return hold;
      };
      const endHold = (slot: Slot, hold: Hold) => {
        hold.end = performance.now() - t0;
        holding--;
        slot.holding = false;
        if (current?.hold === hold) current = undefined;
      };

      const worker = async (i: number) => {
        while (!stop) {
          const slot = slots[i] as Slot;
          if (slot.closing) {
            await sleep(1);
            continue;
          }
          const coordinator = slot.coordinator;
          const useTry = random() < 0.15;
          const controller = new AbortController();
          // Some aborts come within a few ms: while a try is still in flight.
          const r = random();
          const abortAfter = r < 0.15 ? between(0, 3) : r < 0.35 ? between(0, 150) : undefined;
          const timer =
            abortAfter === undefined
              ? undefined
              : setTimeout(() => controller.abort(new Error("stress abort")), abortAfter);
          let lock: Lock | null = null;
          if (!useTry) waitingNow++;
          try {
            lock = useTry
              ? await coordinator.tryAcquire(name)
              : await coordinator.acquire(name, {
                  waitMs: between(5, 300),
                  signal: controller.signal,
                });
          } catch (error) {
            const kind =
              error instanceof Error
                ? error.message === "stress abort"
                  ? "abort"
                  : error.name
                : "?";
            count(`acquire failed: ${kind}`);
          } finally {
            clearTimeout(timer);
            if (!useTry && --waitingNow === 0) noWaiterAt.push(performance.now() - t0);
          }
          if (lock === null) {
            if (useTry) count("try: held");
            continue;
          }
          count(useTry ? "try: granted" : "acquire: granted");
          const hold = onGrant(i, slot, lock);
          const holdMs = between(0, 5);
          if (holdMs > 0) await sleep(holdMs);
          if (hold !== undefined) {
            const stillHeld = lock.held;
            const reason = lock.lostReason;
            endHold(slot, hold);
            const ok = await lock.release().catch((error: unknown) => {
              violations.push(`release of token ${lock.token} threw: ${String(error)}`);
              return false;
            });
            if (!ok) {
              if (stillHeld) {
                violations.push(
                  `release of token ${lock.token} (worker ${i}) returned false but the lock was not reported lost`,
                );
              } else
                lost.push(`token ${lock.token} (worker ${i}): lost before release (${reason})`);
            }
          } else await lock.release().catch(() => false);
        }
      };

      // Now and then a coordinator is closed (waits in flight) and replaced by a new one.
      const closer = async () => {
        let generation = 1;
        const closes: Promise<unknown>[] = [];
        while (!stop) {
          await sleep(between(200, 600));
          if (stop) break;
          const i = between(0, WORKERS - 1);
          const slot = slots[i] as Slot;
          // Not while its worker holds the lock: close would release it under the worker's feet.
          if (slot.holding || slot.closing) continue;
          slot.closing = true;
          count("coordinator closed");
          closes.push(
            slot.coordinator.close().catch((error: unknown) => {
              violations.push(`close of worker ${i}'s coordinator threw: ${String(error)}`);
            }),
          );
          slots[i] = open(i, generation++);
        }
        await Promise.all(closes);
      };

      const running = [...Array.from({ length: WORKERS }, (_, i) => worker(i)), closer()];
      await sleep(CHURN_MS);
      while (
        (holds.length <= ENOUGH_HOLDS || handoffs.length <= ENOUGH_HANDOFFS) &&
        performance.now() - t0 < CHURN_MAX_MS
      ) {
        await sleep(250);
      }
      stop = true;
      await Promise.all(running);
      const churnEnd = performance.now() - t0;
      await Promise.all(slots.map((s) => s.coordinator.close()));
      const closedAt = performance.now() - t0;

      // What the line and the lock look like once every coordinator closed (after the
      // fire-and-forget leave-the-line commands have run).
      await sleep(200);
      const lineAfterClose = await raw.zrange(keys.waiters, "0", "-1");
      const lockAfterClose = await raw.get(keys.lock);
      let cleanAfterMs = Number.NaN;
      for (;;) {
        const [exists, line] = await Promise.all([raw.exists(keys.lock), raw.zcard(keys.waiters)]);
        const t = performance.now() - t0 - closedAt;
        if (exists === 0 && line === 0) {
          cleanAfterMs = t;
          break;
        }
        if (t > 2 * MAX_TTL + 1_000) break;
        await sleep(50);
      }
      await monitor.punsubscribe();

      // Liveness: the idle stretches between a release and the next grant, while some wait
      // was in flight for the whole stretch.
      const sorted = [...holds].sort((a, b) => a.start - b.start);
      const gaps: { from: number; to: number; before: bigint; after: bigint }[] = [];
      for (let k = 1; k < sorted.length; k++) {
        const a = sorted[k - 1] as Hold;
        const b = sorted[k] as Hold;
        const from = Number.isNaN(a.end) ? a.start : a.end;
        if (noWaiterAt.some((t) => t > from && t < b.start)) continue;
        gaps.push({ from, to: b.start, before: a.token, after: b.token });
      }
      const longest = gaps.reduce((m, g) => Math.max(m, g.to - g.from), 0);
      const slowGaps = gaps
        .filter((g) => g.to - g.from > MAX_TTL / 2)
        .map(
          (g) =>
            `${g.from.toFixed(0)}..${g.to.toFixed(0)} ms (${(g.to - g.from).toFixed(0)} ms, token ${g.before} -> ${g.after})`,
        );
      // Grants handed to a wait that never used them: given back at once, or left to expire
      // (a wait that left without leaving the line, so a release handed the lock to nobody).
      const heldTokens = new Set(holds.map((h) => h.token));
      const unused = handoffs
        .filter((h) => !heldTokens.has(h.token))
        .map((h) => {
          const next = sorted.find((s) => s.token > h.token);
          return {
            ...h,
            nextGrantAfterMs: next === undefined ? Number.NaN : next.start - (h.at - t0),
          };
        });
      // A handoff nobody took must be given back at once (the wait that left takes it out of
      // the line and hands on a grant made for it), not left to expire: this found a wait
      // whose joining try was abandoned in flight staying in the line, so the lock idled a TTL.
      const expired = unused.filter((u) => u.nextGrantAfterMs > MAX_TTL / 2);

      const summary = {
        seed,
        churnEndMs: Math.round(churnEnd),
        closeMs: Math.round(closedAt - churnEnd),
        holds: holds.length,
        handoffs: handoffs.length,
        outcomes: Object.fromEntries(outcomes),
        lost,
        longestIdleWhileWaitingMs: Math.round(longest),
        slowGaps,
        unusedHandoffs: unused.length,
        unusedHandoffsLeftToExpire: expired.map(
          (u) =>
            `token ${u.token} to wait ${u.waitNo} of ${u.channel.slice(keys.turnPrefix.length, keys.turnPrefix.length + 8)}.. at ${(u.at - t0).toFixed(0)} ms; next grant ${u.nextGrantAfterMs.toFixed(0)} ms later`,
        ),
        lineAfterClose: lineAfterClose.map((e) => e.split("\n")[0]),
        lockAfterClose: lockAfterClose?.split("\n")[0] ?? null,
        cleanAfterMs: Math.round(cleanAfterMs),
      };
      console.log(`redis line stress: ${JSON.stringify(summary, null, 2)}`);

      expect(violations, `seed ${seed}`).toEqual([]);
      // Enough grants to mean something, and both kinds of grant happened.
      expect(holds.length).toBeGreaterThan(ENOUGH_HOLDS);
      expect(handoffs.length).toBeGreaterThan(ENOUGH_HANDOFFS);
      expect(summary.unusedHandoffsLeftToExpire, `seed ${seed}`).toEqual([]);
      // Liveness: never two TTLs without a grant while someone was waiting.
      expect(longest, JSON.stringify(slowGaps)).toBeLessThan(2 * MAX_TTL);
      // Nothing left behind once every coordinator closed.
      expect(cleanAfterMs, JSON.stringify(summary)).toBeLessThan(2 * MAX_TTL + 1_000);
    }, 45_000);
  });
});
