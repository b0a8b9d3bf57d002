import { type LockWorker, spawnLockWorker } from "@baton/conformance/faults";
import type { Coordinator } from "@baton/core";
import { sleep } from "./handoff.js";
import type { LatencySection } from "./results.js";
import { quantile } from "./stats.js";
import { benchCoordinator } from "./telemetry.js";

/** Options of {@link measureTakeover}. */
export interface TakeoverOptions {
  /** Backend URL for the worker processes and the bench's coordinator. */
  readonly url: string;
  /** Lease length of both sides. */
  readonly ttlMs: number;
  /** Repetitions of each case. Default 3. */
  readonly repetitions?: number;
  /** Lock-name prefix. */
  readonly prefix: string;
}

/** Time the bench's waiter is given to queue behind the worker before the worker goes. */
const QUEUE_MS = 150;

/**
 * Takeover: a lock worker (a child process with its own coordinator) holds a lock, a
 * coordinator here waits on it; then
 * - SIGKILL: the worker is killed; sample = from the kill to the waiter holding (the store must
 *   notice the dead holder: expiry of its lease or session);
 * - graceful: the worker is told to release; sample = from sending the command (one pipe
 *   write to the child) to the waiter holding.
 * Workers for the SIGKILL case are started together up front, to keep the run short.
 */
export async function measureTakeover(options: TakeoverOptions): Promise<LatencySection> {
  const reps = options.repetitions ?? 3;
  const waiter = benchCoordinator({ url: options.url, ttlMs: options.ttlMs, ownerId: "waiter" });
  const workers: LockWorker[] = [];
  const start = async (ownerId: string) => {
    const w = await spawnLockWorker({ url: options.url, ttlMs: options.ttlMs, ownerId });
    workers.push(w);
    return w;
  };
  const killed: number[] = [];
  const graceful: number[] = [];
  try {
    const [victims, polite] = await Promise.all([
      Promise.all(Array.from({ length: reps }, (_, i) => start(`victim-${i}`))),
      start("polite"),
    ]);
    // One warm-up so the waiter's session is open before the first sample.
    await (await waiter.acquire(`${options.prefix}/warm`)).release();
    for (let i = 0; i < reps; i++) {
      graceful.push(
        await once(waiter, polite, `${options.prefix}/graceful-${i}`, () => {
          polite.send({ op: "release", name: `${options.prefix}/graceful-${i}` });
        }),
      );
      const victim = victims[i] as LockWorker;
      killed.push(await once(waiter, victim, `${options.prefix}/killed-${i}`, () => victim.kill()));
    }
  } finally {
    await waiter.close().catch(() => undefined);
    await Promise.all(workers.map((w) => w.stop(1_000).catch(() => undefined)));
  }
  const rowOf = (variant: string, samples: number[]) => {
    const sorted = [...samples].sort((a, b) => a - b);
    return {
      variant,
      role: "coordinator" as const,
      count: samples.length,
      opsPerSec: Number.NaN,
      p50: quantile(sorted, 0.5),
      p99: sorted[sorted.length - 1] as number,
    };
  };
  return {
    figure: "takeover",
    title: `takeover by a waiting coordinator (TTL ${options.ttlMs} ms, ${reps} runs each)`,
    p99Label: "max ms",
    rows: [
      rowOf("after a graceful release (command to the worker -> held here)", graceful),
      rowOf("after SIGKILL of the holder (kill -> held here)", killed),
    ],
    notes: [
      "holder: a lock worker process (spawnLockWorker); waiter: a coordinator in the bench process, queued before the holder goes",
      "p50 is the median of the runs; the graceful case includes one pipe write to the worker process",
      "after SIGKILL the store frees the lock when the holder's lease or session ends; the holder renewed it up to a third of the TTL before the kill, so expect 2/3 to 1 TTL plus detection (PostgreSQL: the server sees the connection close at once)",
    ],
  };
}

/** The worker takes `name`, the waiter queues, `letGo()` runs; returns ms until the waiter holds. */
async function once(
  waiter: Coordinator,
  worker: LockWorker,
  name: string,
  letGo: () => void | Promise<void>,
): Promise<number> {
  const reply = await worker.request(
    { op: "acquire", name, waitMs: 10_000 },
    (e) =>
      (e.event === "acquired" || e.event === "error") && ("name" in e ? e.name === name : true),
  );
  if (reply.event !== "acquired") throw new Error(`takeover: worker could not acquire ${name}`);
  const waiting = waiter.acquire(name, { waitMs: 60_000 });
  await sleep(QUEUE_MS);
  const t0 = performance.now();
  await letGo();
  const lock = await waiting;
  const ms = performance.now() - t0;
  await lock.release();
  return ms;
}
