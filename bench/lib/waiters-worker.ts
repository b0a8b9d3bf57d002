/**
 * A child process of the many-waiters bench (see waiters.ts):
 * `node <execArgv> waiters-worker.ts <url> <ttlMs>`. One coordinator for the process; on
 * `{ op: "run", name, waiters, holdMs, pauseMs, ms }` it runs `waiters` loops on lock `name`
 * (acquire, hold, release, pause) for `ms`, then replies `{ op: "done", events }`: each grant's
 * time and its release() call's time, in ms of the system's monotonic clock
 * (`process.hrtime`), which every process on the machine shares. `{ op: "floor", name, count }`
 * replies `{ samples }`: `count` uncontended acquire + release times. `{ op: "close" }` exits.
 * With a third argument, a store's kind (raw-waiters.ts), the waiters are the raw client's
 * instead: one connection each, blocked in the store's own wait; `url` is then the store's.
 */
import { type RawKind, type RawWaiter, rawWaiter } from "./raw-waiters.js";
import { benchCoordinator } from "./telemetry.js";

const [url, ttl, rawKind] = process.argv.slice(2) as [string, string, RawKind | undefined];
const coordinator =
  rawKind === undefined
    ? benchCoordinator({ url, ttlMs: Number(ttl), ownerId: `waiters-${process.pid}` })
    : undefined;
const now = () => Number(process.hrtime.bigint() / 1_000n) / 1_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Run {
  readonly op: "run";
  readonly name: string;
  readonly waiters: number;
  readonly holdMs: number;
  readonly pauseMs: number;
  readonly ms: number;
  /** Raw waiters: this process makes the lock free before its waiters start. */
  readonly first?: boolean;
}

/**
 * One waiter's loop until the run ends: `take()` resolves a release function once it holds
 * the lock, or `undefined` when its wait ended without it (then `stop()` tells whether to end).
 * Each grant's time and its release call's time go to `events`.
 */
async function loop(
  m: Run,
  events: [number, number][],
  stop: () => boolean,
  take: () => Promise<(() => Promise<unknown>) | undefined>,
): Promise<void> {
  while (!stop()) {
    const release = await take();
    if (release === undefined) continue;
    const grantAt = now();
    await sleep(m.holdMs);
    const releaseAt = now();
    await release();
    events.push([grantAt, releaseAt]);
    await sleep(m.pauseMs);
  }
}

async function run(m: Run): Promise<[number, number][]> {
  if (coordinator === undefined) return await runRaw(m, rawKind as RawKind);
  const events: [number, number][] = [];
  const end = new AbortController();
  const timer = setTimeout(() => end.abort(), m.ms);
  const take = () =>
    coordinator.acquire(m.name, { waitMs: 300_000, signal: end.signal }).then(
      (lock) => () => lock.release(),
      (error: unknown) => {
        if (end.signal.aborted) return undefined; // the run ended: the loop stops
        throw error;
      },
    );
  const stop = () => end.signal.aborted;
  await Promise.all(Array.from({ length: m.waiters }, () => loop(m, events, stop, take)));
  clearTimeout(timer);
  return events;
}

/** {@link run} with raw waiters: each opens its connection, then loops until the run ends. */
async function runRaw(m: Run, kind: RawKind): Promise<[number, number][]> {
  const events: [number, number][] = [];
  const waiters: RawWaiter[] = [];
  try {
    for (let i = 0; i < m.waiters; i++) waiters.push(await rawWaiter(kind, url, m.name));
    if (m.first) await waiters[0]?.makeFree?.();
    const endAt = performance.now() + m.ms;
    const stop = () => performance.now() >= endAt;
    await Promise.all(
      waiters.map((w) =>
        loop(m, events, stop, async () => ((await w.acquire()) ? () => w.release() : undefined)),
      ),
    );
  } finally {
    await Promise.all(waiters.map((w) => w.close()));
  }
  return events;
}

/** `count` uncontended acquire + release of `name`, one after another: their times, ms. */
async function floor(name: string, count: number): Promise<number[]> {
  if (coordinator === undefined) throw new Error("waiters-worker: no floor with raw waiters");
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await (await coordinator.acquire(name)).release();
    samples.push(performance.now() - t);
  }
  return samples;
}

process.on("message", (m: Run | { op: "floor"; name: string; count: number } | { op: "close" }) => {
  void (async () => {
    if (m.op === "close") {
      await coordinator?.close().catch(() => undefined);
      process.exit(0);
    }
    try {
      if (m.op === "floor") {
        process.send?.({ op: "done", events: [], samples: await floor(m.name, m.count) });
        return;
      }
      process.send?.({ op: "done", events: await run(m) });
    } catch (error) {
      process.send?.({
        op: "error",
        message: error instanceof Error ? error.message : String(error),
      });
    }
  })();
});
process.send?.({ op: "ready" });
