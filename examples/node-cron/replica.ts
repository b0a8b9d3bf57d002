/**
 * One replica of an app that runs a node-cron task every second with `distributed: true` and
 * Baton's run coordinator. Start it three times against one store: each fire runs on exactly
 * one of them. Stop one with Ctrl-C (or kill it) and the others carry on.
 *
 *   BATON_URL=redis://127.0.0.1:6379 REPLICA=a node --import tsx examples/node-cron/replica.ts
 */
import { createCoordinator, redactUrl } from "@baton/core";
import { batonRunCoordinator } from "@baton/node-cron";
import "@baton/postgres";
import "@baton/redis";
import cron from "node-cron";

const url = process.env.BATON_URL ?? "redis://127.0.0.1:6379";
const replica = process.env.REPLICA ?? `${process.pid}`;

const coordinator = createCoordinator({ url, ttlMs: 5_000, ownerId: `replica-${replica}` });
const runs = batonRunCoordinator(coordinator);

cron.schedule(
  "* * * * * *",
  runs.task(async ({ slot, attempt, token, signal }) => {
    // Your job: send `token` with every write to a store that checks it, and check `signal`
    // before each write.
    await new Promise((resolve) => setTimeout(resolve, 200));
    signal.throwIfAborted();
    console.log(`replica ${replica} ran ${slot} (attempt ${attempt}, token ${token})`);
  }),
  { name: "every-second", distributed: true, runCoordinator: runs, distributedLease: 5_000 },
);
console.log(`replica ${replica} scheduled "every-second" on ${redactUrl(url)}`);

const stop = async () => {
  await cron.shutdown();
  runs.close();
  await coordinator.close();
  console.log(`replica ${replica} stopped`);
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
