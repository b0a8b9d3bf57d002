// The README's example, runnable: `npx tsx --conditions=@baton/source packages/core/examples/quick-start.ts`.
import { createCoordinator, LockHeldError, MemoryFence } from "@baton/core";

// One coordinator per process; swap the backend by URL (memory:// needs no server).
const coordinator = createCoordinator({ url: "memory://quick-start", ttlMs: 5_000 });
const fence = new MemoryFence(); // stands in for your database's fence table

// Run a job under the lock. The signal aborts the moment the lock can no longer be trusted;
// the token goes with every write, so a paused old holder's writes are rejected.
const billed = await coordinator.withLock("invoices", async ({ token, signal }) => {
  let count = 0;
  for (const client of ["acme", "globex", "initech"]) {
    signal.throwIfAborted();
    await fence.write("invoices", token, () => {
      count++; // the real write happens here, inside the fence's check
    });
    console.log(`billed ${client} with token ${token}`);
  }
  return count;
});
console.log(`billed ${billed} clients`);

// Skip the job if another replica has it.
const lock = await coordinator.tryAcquire("nightly-report");
if (lock === null) console.log("someone else runs the report");
else {
  try {
    console.log(`report runs under token ${lock.token}`);
  } finally {
    await lock.release();
  }
}

// Waiting with waitMs: 0 makes "held" an error you can catch by class.
const held = await coordinator.acquire("cleanup");
const other = createCoordinator({ url: "memory://quick-start" });
await other.acquire("cleanup", { waitMs: 0 }).catch((error: unknown) => {
  if (error instanceof LockHeldError) console.log(`cleanup is held: ${error.code}`);
});
await held.release();
await Promise.all([coordinator.close(), other.close()]);
