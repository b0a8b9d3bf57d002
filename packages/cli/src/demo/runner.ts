import {
  type Clock,
  type Coordinator,
  type Lock,
  LockTimeoutError,
  type MemoryFence,
  StaleTokenError,
  sleep,
} from "@baton/core";
import type { Invoice, InvoiceTable } from "./invoice-table.js";

/** Tonight's invoice run, the same on every server. */
export interface InvoiceJob {
  /** The lock name; also the fenced resource (correctness mode raises the fence by lock name). */
  readonly lockName: string;
  readonly month: string;
  /** Clients to bill, in order from client 1. */
  readonly clientIds: readonly number[];
  /** Preparing one bill takes between these many ms. */
  readonly billMs: readonly [min: number, max: number];
  /** How long one `acquire` waits in the queue before the scheduler asks again. */
  readonly waitMs: number;
}

/** How a runner guards its writes: what the demo's three variants change. */
export interface Protection {
  /** Check `lock.signal` before each write (`false`: the naive job). */
  readonly checkSignal: boolean;
  /** Send every write through this fence with the lock's token (correctness mode). */
  readonly fence?: MemoryFence;
}

/** One server: its coordinator, its clock, and the shared database. */
export interface Runner {
  readonly name: string;
  readonly coordinator: Coordinator;
  /** The clock this runner's process lives on (its sleeps freeze with it). */
  readonly clock: Clock;
  readonly table: InvoiceTable;
  readonly job: InvoiceJob;
  readonly protection: Protection;
  /** Called between the lock check and the write: where the demo freezes runner 1. */
  readonly beforeWrite?: () => Promise<void>;
}

/**
 * One server's scheduler: every server's scheduler retries the job until the night's run is
 * marked done. Waiting in `acquire` is how it retries: the store queues the runners and
 * hands the lock to the next one when the holder releases it or its lease runs out.
 */
export async function runScheduler(runner: Runner, signal: AbortSignal): Promise<void> {
  const { coordinator, job, table } = runner;
  while (!table.isDone(job.month)) {
    let lock: Lock;
    try {
      lock = await coordinator.acquire(job.lockName, { waitMs: job.waitMs, signal });
    } catch (error) {
      if (error instanceof LockTimeoutError) continue;
      throw error;
    }
    try {
      if (!table.isDone(job.month)) await billClients(runner, lock);
    } catch (error) {
      // The fence has seen a newer token: someone else runs the job now. Stop writing; the
      // scheduler asks for the lock again and finds the run done.
      if (!(error instanceof StaleTokenError)) throw error;
    } finally {
      await lock.release();
    }
  }
}

/**
 * The job under the lock. Its to-do list is made when it gets the lock: the clients, from
 * client 1 up, with no invoice for this month yet (a new holder redoes what is missing).
 */
async function billClients(runner: Runner, lock: Lock): Promise<void> {
  const { job, table, protection } = runner;
  for (const clientId of table.unbilled(job.month, job.clientIds)) {
    const invoice = await prepareInvoice(runner, clientId, lock.token);
    // "Am I still the holder?" A good habit, but it cannot make the write below safe...
    if (protection.checkSignal && lock.signal.aborted) return;
    // ...because the process can freeze right here, after the check and before the write,
    // for longer than its lease (a GC pause, a SIGSTOP, a suspended VM). Kleppmann's point.
    await runner.beforeWrite?.();
    await save(runner, lock.token, () => table.insert(invoice));
  }
  await save(runner, lock.token, () => table.markDone(job.month));
}

/**
 * Every write goes through the fence when there is one. The fence, not the frozen runner,
 * can tell it is stale: it rejects a token older than the newest it has seen.
 */
async function save<T>(runner: Runner, token: bigint, write: () => T): Promise<T> {
  const fence = runner.protection.fence;
  if (fence === undefined) return write();
  return await fence.write(runner.job.lockName, token, write);
}

/** Works out one bill: takes a little while, on this runner's own clock. */
async function prepareInvoice(runner: Runner, clientId: number, token: bigint): Promise<Invoice> {
  const [min, max] = runner.job.billMs;
  await sleep(runner.clock, min + Math.random() * (max - min));
  const amountCents = 10_000 + clientId * 125;
  return { clientId, month: runner.job.month, amountCents, token, runner: runner.name };
}
