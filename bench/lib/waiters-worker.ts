/**
 * A child process of the many-waiters bench (see waiters.ts):
 * `node <execArgv> waiters-worker.ts <url> <ttlMs>`. One coordinator for the process; on
 * `{ op: "run", name, waiters, holdMs, pauseMs, ms }` it runs `waiters` loops on lock `name`
 * (acquire, hold, release, pause) for `ms`, then replies `{ op: "done", events }`: each grant's
 * time and its release() call's time, in ms of the system's monotonic clock
 * (`process.hrtime`), which every process on the machine shares. `{ op: "close" }` exits.
 */
import { benchCoordinator } from "./telemetry.js";

const [url, ttl] = process.argv.slice(2) as [string, string];
const coordinator = benchCoordinator({
  url,
  ttlMs: Number(ttl),
  ownerId: `waiters-${process.pid}`,
});
const now = () => Number(process.hrtime.bigint() / 1_000n) / 1_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Run {
  readonly op: "run";
  readonly name: string;
  readonly waiters: number;
  readonly holdMs: number;
  readonly pauseMs: number;
  readonly ms: number;
}

async function run(m: Run): Promise<[number, number][]> {
  const events: [number, number][] = [];
  const end = new AbortController();
  const timer = setTimeout(() => end.abort(), m.ms);
  await Promise.all(
    Array.from({ length: m.waiters }, async () => {
      while (!end.signal.aborted) {
        let lock: Awaited<ReturnType<typeof coordinator.acquire>>;
        try {
          lock = await coordinator.acquire(m.name, { waitMs: 300_000, signal: end.signal });
        } catch {
          break;
        }
        const grantAt = now();
        await sleep(m.holdMs);
        const releaseAt = now();
        await lock.release();
        events.push([grantAt, releaseAt]);
        await sleep(m.pauseMs);
      }
    }),
  );
  clearTimeout(timer);
  return events;
}

process.on("message", (m: Run | { op: "close" }) => {
  void (async () => {
    if (m.op === "close") {
      await coordinator.close().catch(() => undefined);
      process.exit(0);
    }
    try {
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
