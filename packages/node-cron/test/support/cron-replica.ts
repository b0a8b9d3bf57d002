/**
 * One replica of a per-second node-cron task with `distributed: true` and Baton's run
 * coordinator, in its own process. Prints one JSON line per event: `ready`, `started` and
 * `finished` (the task's own lines, with the fire's slot, token and attempt), `result` (what
 * the run coordinator did for a fire), `missed` (a fire node-cron itself skipped: the process
 * was too late for it), `error` (the coordinator's background errors).
 *
 * Environment: BATON_URL, BATON_TTL_MS (the coordinator's TTL and the task's
 * distributedLease), BATON_OWNER_ID, BATON_JOB (the task's name), BATON_HOLD_MS (how long the
 * task runs).
 */
import { createCoordinator } from "@baton/core";
import { batonRunCoordinator } from "@baton/node-cron";
import cron from "node-cron";

const url = process.env.BATON_URL as string;
const ttlMs = Number(process.env.BATON_TTL_MS);
const ownerId = process.env.BATON_OWNER_ID as string;
const job = process.env.BATON_JOB as string;
const holdMs = Number(process.env.BATON_HOLD_MS);

/** Stdout is a pipe: a write is synchronous, so a line is out before a SIGKILL that follows. */
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const coordinator = createCoordinator({ url, ttlMs, ownerId });
coordinator.on("backgroundError", ({ error, during }) => {
  say({ t: "error", during, message: (error as Error)?.message ?? String(error) });
});

const runs = batonRunCoordinator(coordinator, {
  atMostMs: 20_000,
  onResult: (result, { slot }) => {
    const attempt =
      result.outcome === "ran" || result.outcome === "failed"
        ? { attempt: result.attempt, token: `${result.token}` }
        : {};
    say({ t: "result", slot, outcome: result.outcome, ...attempt });
  },
});

const task = cron.schedule(
  "* * * * * *",
  runs.task(async ({ slot, token, attempt, signal }) => {
    say({ t: "started", slot, token: `${token}`, attempt });
    await sleep(holdMs);
    signal.throwIfAborted();
    say({ t: "finished", slot, token: `${token}`, attempt });
  }),
  { name: job, distributed: true, runCoordinator: runs, distributedLease: ttlMs },
);
task.on("execution:missed", (context) => {
  say({ t: "missed", slot: context.date.toISOString().replace(/\.000Z$/, "Z") });
});

process.once("SIGTERM", async () => {
  await cron.shutdown();
  runs.close();
  await coordinator.close();
  say({ t: "closed" });
  process.exit(0);
});
say({ t: "ready", pid: process.pid });
