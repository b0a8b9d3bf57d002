import { type Coordinator, createCoordinator, LockLostError, type Permit } from "@baton/core";
import { afterEach, describe, expect } from "vitest";
import { spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import type { WorkerEvent } from "../../faults/worker-protocol.js";
import { checkHistory } from "../../history/check-history.js";
import type { History } from "../../history/history.js";
import { RecordedWorker } from "../../history/recorded-worker.js";
import { losableBackend } from "../losable-backend.js";
import { skipUnless } from "../skip-unless.js";
import { delay, type SuiteContext, settle } from "../suite-context.js";

/** What the semaphore and read-write lock groups read of the backend's declarations. */
export interface PermitGroupOptions {
  /** Waiters are served in the order they came. */
  readonly fifo: boolean;
  /** Tokens order grants (fencing is not `none`). */
  readonly fencing: boolean;
  /** The backend's URL for worker processes, or why holders cannot run in them. */
  readonly workers: { readonly url: () => string } | { readonly skip: string };
}

/** An acquire's grant as a worker reported it. */
export type PermitsAcquired = Extract<WorkerEvent, { event: "permits-acquired" }>;

/** True for the `permits-acquired` event of `hold`. */
export const acquiredHold =
  (hold: string) =>
  (e: WorkerEvent): e is PermitsAcquired =>
    e.event === "permits-acquired" && e.hold === hold;

/** True for the `permits-lost` event of `hold`. */
export const lostHold = (hold: string) => (e: WorkerEvent) =>
  e.event === "permits-lost" && e.hold === hold;

/** Expects `promise` to reject with an instance of `type`, and returns the error. */
export async function rejection<E extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  const outcome = await settle(promise);
  if (outcome.ok) throw new Error(`expected a ${type.name}, got ${String(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(type);
  return outcome.error as E;
}

/** Expects the checker to find nothing wrong with `history`. */
export function expectHistoryPasses(history: History, fencing: boolean): void {
  expect(
    checkHistory(history, { fencing }).map((v) => v.message),
    `history:\n${history.describe()}`,
  ).toEqual([]);
}

/**
 * The control of a history with paused and killed holders: counted as held beyond their
 * pause and kill, their permits overlap the later grants, and the checker finds at least
 * `atLeast` capacity violations.
 */
export function expectControlCaught(history: History, fencing: boolean, atLeast: number): void {
  const unaware = history.entries.filter((e) => e.type !== "pause" && e.type !== "crash");
  const found = checkHistory(unaware, { fencing }).filter((v) => v.kind === "capacity");
  expect(found.length, `history:\n${history.describe()}`).toBeGreaterThanOrEqual(atLeast);
}

/** Starts a lock worker process named `process` whose events go into `history`. */
export type SpawnRecordedWorker = (history: History, process: string) => Promise<RecordedWorker>;

/**
 * Registers `register`'s tests under "holders in worker processes", skipped with the reason
 * when the backend's holders cannot run in other processes. The workers they spawn are killed
 * after each test.
 */
export function describeWorkerHolders(
  ctx: SuiteContext,
  workers: PermitGroupOptions["workers"],
  register: (spawn: SpawnRecordedWorker) => void,
): void {
  const skip = "skip" in workers ? workers.skip : undefined;
  skipUnless(skip === undefined, skip ?? "", () => {
    const url = "url" in workers ? workers.url : () => "";
    describe("holders in worker processes", () => {
      const cleanups: (() => Promise<unknown>)[] = [];
      afterEach(async () => {
        for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
      });
      register(async (history, process) => {
        const w = await spawnLockWorker({ url: url(), ttlMs: ctx.target.ttlMs, ownerId: process });
        cleanups.push(() => w.kill());
        return new RecordedWorker(history, process, w);
      });
    });
  });
}

/** A `with*` callback that waits until its signal aborts (or `boundMs` passes). */
type UntilLost = (context: { signal: AbortSignal }) => Promise<string>;

/**
 * Expects `run` (a `withPermit`, `withRead` or `withWrite` on coordinator `c`, calling `fn`)
 * to reject with a `LockLostError` when the session is lost while `fn` runs.
 */
export async function expectLossReported(
  ctx: SuiteContext,
  boundMs: number,
  run: (c: Coordinator, fn: UntilLost) => Promise<unknown>,
): Promise<void> {
  const losable = losableBackend(ctx.backend);
  const c = createCoordinator({ backend: losable.backend, ttlMs: ctx.target.ttlMs });
  try {
    const lost = await settle(
      run(c, async ({ signal }) => {
        losable.loseSessions();
        await new Promise((resolve) => {
          signal.addEventListener("abort", resolve);
          setTimeout(resolve, boundMs);
        });
        return "finished without noticing";
      }),
    );
    expect(lost.ok ? lost.value : lost.error).toBeInstanceOf(LockLostError);
  } finally {
    await c.close();
  }
}

/** How a request fared behind a stream of smaller ones, from {@link behindAStream}. */
export interface StreamOutcome {
  /** From asking to the grant. */
  readonly waitedMs: number;
  /** The stream's grants asked for well (500 ms) after the request and granted before it. */
  readonly overtook: readonly { at: number; startedAt: number }[];
}

/**
 * A stream of 4 loops, each taking a small grant (`small(i)` makes loop `i`'s acquire),
 * holding it 60 ms and asking again, so some of it is held all the time; `ready` opens the
 * big request's session, and 300 ms later `big` asks for what only a pause in the stream
 * can give. Resolves how long `big` waited, or rejects as it did.
 */
export async function behindAStream(
  small: (i: number) => ((waitMs: number) => Promise<Permit>) | undefined,
  ready: () => Promise<unknown>,
  big: (waitMs: number) => Promise<Permit>,
  boundMs: number,
): Promise<StreamOutcome> {
  let streaming = true;
  const grants: { at: number; startedAt: number }[] = [];
  const loop = async (i: number) => {
    const acquire = small(i);
    if (acquire === undefined) return;
    await delay(i * 20);
    while (streaming) {
      const startedAt = performance.now();
      const outcome = await settle(acquire(boundMs));
      if (!outcome.ok) continue;
      grants.push({ at: performance.now(), startedAt });
      await delay(60);
      await outcome.value.release();
    }
  };
  const loops = Array.from({ length: 4 }, (_, i) => loop(i));
  // Its session is open before it asks, so its request reaches the queue in one round trip.
  await ready();
  await delay(300);
  const askedAt = performance.now();
  const granted = await settle(big(boundMs));
  const grantedAt = performance.now();
  streaming = false;
  if (granted.ok) await granted.value.release();
  await Promise.all(loops);
  if (!granted.ok) throw granted.error;
  return {
    waitedMs: grantedAt - askedAt,
    overtook: grants.filter((g) => g.startedAt > askedAt + 500 && g.at < grantedAt),
  };
}
