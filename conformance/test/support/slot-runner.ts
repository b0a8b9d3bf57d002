/**
 * One replica of a per-second job, in its own process: `coordinator.schedule` every second,
 * with a fence that lives in the test's process (every raise and write is a request the test
 * answers, so the test sees each write with its slot and token, in the order the fence
 * decided them). The job writes through the fence at its start and at its end, checking its
 * signal before each write as users are told to; some runs freeze the whole process
 * (SIGSTOP) between the two writes, and the test resumes it later.
 *
 * Prints one JSON line per event and reads the fence's answers on stdin.
 *
 * Environment: BATON_URL, BATON_TTL_MS, BATON_OWNER_ID, BATON_JOB, BATON_HOLD_MS (the job's
 * time between its writes), BATON_FREEZE_SHARE (the share of runs that freeze, 0 to 1),
 * BATON_FENCED (`1`: correctness mode, the fence raised with every slot lock's token; else
 * efficiency mode, where the job's first write raises the fence).
 */
import { createInterface } from "node:readline";
import { createCoordinator, type Fence, StaleTokenError } from "@baton/core";

const url = process.env.BATON_URL as string;
const ttlMs = Number(process.env.BATON_TTL_MS);
const ownerId = process.env.BATON_OWNER_ID as string;
const job = process.env.BATON_JOB as string;
const holdMs = Number(process.env.BATON_HOLD_MS);
const freezeShare = Number(process.env.BATON_FREEZE_SHARE);
const fenced = process.env.BATON_FENCED === "1";

/** Stdout is a pipe: a write is synchronous, so a line is out before a SIGSTOP that follows. */
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

const answers = new Map<number, (answer: { ok: boolean; highest: string }) => void>();
let nextId = 0;

/** Asks the test's fence; rejects with `StaleTokenError` when it has seen a newer token. */
async function fenceRequest(
  op: "raise" | "start" | "end",
  resource: string,
  token: bigint,
): Promise<void> {
  const id = nextId++;
  const answer = new Promise<{ ok: boolean; highest: string }>((resolve) => {
    answers.set(id, resolve);
  });
  say({ t: "fence", id, op, resource, token: `${token}` });
  const { ok, highest } = await answer;
  if (!ok) throw new StaleTokenError(resource, token, BigInt(highest));
}

const remoteFence: Fence = {
  raise: (resource, token) => fenceRequest("raise", resource, token),
};

const coordinator = createCoordinator({
  url,
  ttlMs,
  ownerId,
  ...(fenced ? { mode: "correctness" as const, fence: remoteFence } : {}),
});
coordinator.on("backgroundError", ({ error, during }) => {
  say({ t: "error", during, message: (error as Error)?.message ?? String(error) });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

coordinator.schedule(
  "* * * * * *",
  job,
  async ({ slot, token, attempt, signal }) => {
    const resource = `${job}/slot/${slot}`;
    say({ t: "started", slot, attempt, token: `${token}` });
    signal.throwIfAborted();
    await fenceRequest("start", resource, token);
    await sleep(holdMs);
    if (Math.random() < freezeShare) {
      // Frozen between the check of the signal and the write, as a GC pause or a stopped VM
      // would: the first thing the job does on waking is to check its signal again.
      say({ t: "freezing", slot, token: `${token}` });
      process.kill(process.pid, "SIGSTOP");
    }
    signal.throwIfAborted();
    await fenceRequest("end", resource, token);
    return ownerId;
  },
  {
    atMostMs: 10_000,
    onResult: (result, slot) => {
      const error =
        result.outcome === "failed"
          ? { error: (result.error as { name?: string } | undefined)?.name ?? "Error" }
          : {};
      const tokenOf =
        result.outcome === "ran" || result.outcome === "failed"
          ? { attempt: result.attempt, token: `${result.token}` }
          : {};
      say({ t: "result", slot, outcome: result.outcome, ...tokenOf, ...error });
    },
  },
);

const input = createInterface({ input: process.stdin });
input.on("line", (line) => {
  const answer = JSON.parse(line) as { id: number; ok: boolean; highest: string };
  answers.get(answer.id)?.(answer);
  answers.delete(answer.id);
});
// The test went away: nothing answers the fence any more.
input.on("close", () => process.exit(0));
say({ t: "ready", pid: process.pid });
