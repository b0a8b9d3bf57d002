import type { LockWorker } from "../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../faults/worker-protocol.js";

/** A worker's `elected` event. */
export type Elected = Extract<WorkerEvent, { event: "elected" }>;

/** True for an `elected` event. */
export const isElected = (e: WorkerEvent): e is Elected => e.event === "elected";

/**
 * Waits until one of `candidates` reports a term greater than `afterTerm` and returns that
 * worker and term (rejects after `timeoutMs`).
 */
export async function nextLeader(
  candidates: readonly LockWorker[],
  afterTerm: bigint,
  timeoutMs: number,
): Promise<{ worker: LockWorker; term: bigint }> {
  const winner = await Promise.any(
    candidates.map((w) =>
      w.waitFor((e): e is Elected => isElected(e) && BigInt(e.term) > afterTerm, timeoutMs),
    ),
  );
  const who = candidates.find((w) => w.events.includes(winner)) as LockWorker;
  return { worker: who, term: BigInt(winner.term) };
}

/**
 * Calls `probe` every `intervalMs` until `done` accepts its result, and returns that result.
 * After `timeoutMs` (monotonic clock) it throws with the last result, so a failure shows what
 * the workers saw.
 */
export async function pollUntil<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  intervalMs = 100,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (performance.now() >= deadline)
      throw new Error(
        `${what}: not reached within ${timeoutMs} ms; last: ${JSON.stringify(value, (_k, v) =>
          typeof v === "bigint" ? `${v}` : v,
        )}`,
      );
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
