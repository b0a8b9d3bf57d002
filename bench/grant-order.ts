/**
 * Who gets a contended lock next: three processes (each with its own coordinator and
 * backend) loop acquire, hold about 50 ms, release on one name for a while, and the grants
 * are put in order by fencing token. Prints the re-grab share (the share of grants that went
 * to the process that held the lock just before) and the longest wait of any acquire.
 *
 *   npx tsx --conditions=@baton/source bench/grant-order.ts dynamodb azure-blob postgres-lease
 *
 * With `--in-process`, the three coordinators share one process instead (as the grant-order
 * test runs them): one busy event loop for all three, which shows a loaded machine sooner.
 *
 * Starts the servers of the backends named (as the tests do) and stops them after. A FIFO
 * backend gives a share near 0; polling backends without a hand-off give the releaser the
 * next grant whenever no waiter looks in the gap between its release and its next acquire.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { BackendKind } from "@baton/conformance/harness";
import { startServers } from "@baton/conformance/harness";
import {
  contendInProcess,
  type GrantOrder,
  grantOrder,
  openSession,
  type WorkerGrants,
} from "./lib/grant-order.js";

const SECONDS = Number(process.env.GRANT_ORDER_SECONDS ?? 20);
const HOLD_MS = 50;
const WAIT_MS = 8_000;
const TTL_MS = 2_000;

if (process.argv[2] === "--worker") {
  await worker(process.argv[3] as string, process.argv[4] as string, Number(process.argv[5]));
} else {
  const args = process.argv.slice(2).filter((a) => a !== "--");
  const inProcess = args.includes("--in-process");
  await main(args.filter((a) => a !== "--in-process") as BackendKind[], inProcess);
}

async function main(kinds: readonly BackendKind[], inProcess: boolean): Promise<void> {
  // Row leases live on the postgres server.
  const backends = kinds.includes("postgres-lease") ? [...kinds, "postgres" as const] : kinds;
  const started = await startServers({ backends });
  try {
    for (const kind of kinds) {
      const url = (started.servers as unknown as Record<string, string | undefined>)[kind];
      if (url === undefined) throw new Error(`no server for ${kind}`);
      const name = `grant-order-${Date.now()}`;
      const runs = inProcess
        ? await contendInProcess(url, name, SECONDS * 1000, WAIT_MS)
        : await Promise.all(["a", "b", "c"].map((id) => runWorker(url, name, id)));
      report(inProcess ? `${kind} (in one process)` : kind, grantOrder(runs));
    }
  } finally {
    await started.stop();
  }
}

function runWorker(url: string, name: string, id: string): Promise<WorkerGrants> {
  return new Promise((resolve, reject) => {
    const child = fork(
      fileURLToPath(import.meta.url),
      ["--worker", url, name, String(SECONDS * 1000)],
      {
        execArgv: ["--conditions=@baton/source", "--import", "tsx"],
        env: { ...process.env, BATON_WORKER_ID: id },
      },
    );
    child.on("message", (m) => resolve({ id, ...(m as Omit<WorkerGrants, "id">) }));
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) reject(new Error(`worker ${id} exited with ${code}`));
    });
  });
}

async function worker(url: string, name: string, forMs: number): Promise<void> {
  const core = await import("@baton/core");
  await import("@baton/dynamodb");
  await import("@baton/azure-blob");
  await import("@baton/postgres");
  const coordinator = core.createCoordinator({ url, ttlMs: TTL_MS });
  await openSession(coordinator, name); // the session is open before the clock starts
  const grants: bigint[] = [];
  const waits: number[] = [];
  let timeouts = 0;
  const end = performance.now() + forMs;
  while (performance.now() < end) {
    const asked = performance.now();
    try {
      const lock = await coordinator.acquire(name, { waitMs: WAIT_MS });
      waits.push(performance.now() - asked);
      grants.push(lock.token as bigint);
      await new Promise((r) => setTimeout(r, HOLD_MS));
      await lock.release();
    } catch (error) {
      if (!(error instanceof core.LockTimeoutError)) throw error;
      waits.push(performance.now() - asked);
      timeouts++;
    }
  }
  await coordinator.close();
  process.send?.({ tokens: grants.map(String), waits, timeouts }, () => process.exit(0));
}

function report(kind: string, r: GrantOrder): void {
  console.log(
    `${kind}: ${r.grants} grants in ${SECONDS} s (${r.perWorker.join(" / ")}), re-grab share ${(r.regrabShare * 100).toFixed(1)}%, longest wait ${Math.round(r.longestWaitMs)} ms, p99 wait ${Math.round(r.p99WaitMs)} ms, waits ran out ${r.timeouts}`,
  );
}
