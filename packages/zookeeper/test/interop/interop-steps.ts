import { checkHistory, History, RecordedCoordinator } from "@baton/conformance/history";
import type { Coordinator } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import { expect } from "vitest";
import { exists, touchSession } from "../../src/client-calls.js";
import { childrenOf, waitUntil } from "../support/counting-clients.js";
import type { InteropHold, InteropTarget, InteropWorker } from "./spawn-interop-worker.js";

/**
 * The time each interop test may take: its steps wait up to 30 s each for another process (a
 * JVM or a Python interpreter on a busy machine), so the test's own bound stays well above.
 */
export const INTEROP_TEST_MS = 120_000;

/** The `host:port,...` part of a `zookeeper://` URL (the connect string other clients take). */
export function connectString(url: string): string {
  return (url.slice("zookeeper://".length).split(/[/?]/)[0] as string).trim();
}

/** Resolves once `dir` has `count` children (contenders queued), polling. */
export function queuedCount(raw: Client, dir: string, count: number, what: string): Promise<void> {
  return waitUntil(
    async () => (await childrenOf(raw, dir)).length === count,
    30_000,
    `${count} contenders are queued on ${dir} (${what})`,
  );
}

/** Fails with every violation and the whole history when `history` breaks an invariant. */
export function expectCleanHistory(history: History): void {
  const violations = checkHistory(history, { fencing: true });
  expect(
    violations.map((v) => v.message),
    `history:\n${history.describe()}`,
  ).toEqual([]);
}

/**
 * Whether `path` exists, read once `raw` has caught up with the leader. (A container node
 * looks like a persistent one to clients: its stat shows no owner. Only ZooKeeper deleting
 * it once emptied tells it apart.)
 */
export async function nodeExists(raw: Client, path: string): Promise<boolean> {
  await touchSession(raw);
  return (await exists(raw, path)) !== null;
}

/** True when `promise` is still pending after `ms`. */
export async function stillPending(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await new Promise((r) => setTimeout(r, ms));
  return !settled;
}

/**
 * A worker's acquires and releases recorded in `history` under the worker's id, on the test
 * process's clock: a grant counts from when its `acquired` line arrived, a hold ends when the
 * test sent `release`.
 */
export class RecordedInteropWorker {
  readonly history: History;
  readonly worker: InteropWorker;
  readonly key: string;
  /** Where and how it contends when not as the worker was started (Curator only). */
  readonly target: InteropTarget;

  constructor(history: History, worker: InteropWorker, key: string, target: InteropTarget = {}) {
    this.history = history;
    this.worker = worker;
    this.key = key;
    this.target = target;
  }

  /** Sends `acquire`; the returned promise settles with the hold (recorded when it does). */
  acquire(timeoutMs?: number): Promise<InteropHold> {
    const op = this.history.invokeAcquire(this.worker.id, this.key);
    return this.worker.acquire(timeoutMs, this.target).then(
      (hold) => {
        op.ok(hold.token, { at: hold.at });
        return hold;
      },
      (error: Error) => {
        op.fail(error.message);
        throw error;
      },
    );
  }

  /** Sends `release`; resolves with the time the node was gone. */
  async release(): Promise<number> {
    const op = this.history.invokeRelease(this.worker.id, this.key);
    const at = await this.worker.release();
    op.done(true, at);
    return at;
  }

  /** SIGKILLs the worker, recording the crash. */
  async kill(): Promise<void> {
    this.history.crash(this.worker.id);
    await this.worker.kill();
  }
}

/**
 * A foreign holder holds Baton off on `name` (its lock directory `dir`): Baton's try refuses,
 * its acquire queues behind it and is granted, with a greater token, once the foreign worker
 * releases; the history stays clean. `library` names the worker in messages.
 */
export async function expectForeignHoldsOffBaton(
  baton: Coordinator,
  worker: InteropWorker,
  library: string,
  name: string,
  raw: Client,
  dir: string,
): Promise<void> {
  const history = new History();
  const b = new RecordedCoordinator(history, "baton", baton);
  const foreign = new RecordedInteropWorker(history, worker, name);
  const hold = await foreign.acquire(30_000);
  expect(await b.tryAcquire(name)).toBeNull();
  const waiting = b.acquire(name, { waitMs: 30_000 });
  await queuedCount(raw, dir, 2, `${library} holds, Baton waits`);
  expect(await stillPending(waiting, 500)).toBe(true);
  const releasing = performance.now();
  await foreign.release();
  const lock = await waiting;
  console.info(`${library} -> Baton hand-off: ${Math.round(performance.now() - releasing)} ms`);
  expect(lock.token).toBeGreaterThan(hold.token);
  await b.release(lock);
  expectCleanHistory(history);
}
