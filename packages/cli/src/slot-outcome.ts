import { LockLostError, type RunOnceResult, RunTimeoutError } from "@baton/core";
import { EXIT } from "./exit-codes.js";
import { exitCodeOf } from "./run-child.js";
import { CommandFailedError } from "./slot-command.js";

/** The exit code of `baton run-once` for what its call did. */
export function exitCodeOfResult(result: RunOnceResult<unknown>): number {
  switch (result.outcome) {
    case "ran":
      return 0;
    case "already-done":
      return EXIT.alreadyDone;
    case "running-elsewhere":
      return EXIT.runningElsewhere;
    case "attempts-exhausted":
      return EXIT.attemptsExhausted;
    case "failed": {
      const { error } = result;
      if (error instanceof CommandFailedError) return exitCodeOf(error.exit);
      if (error instanceof RunTimeoutError) return EXIT.overran;
      if (error instanceof LockLostError) return EXIT.lost;
      return 1;
    }
  }
}

/** One line saying what a call did for `slot`, e.g. `ran (attempt 1, token 42)`. */
export function describeResult(result: RunOnceResult<unknown>): string {
  switch (result.outcome) {
    case "ran":
      return `ran (attempt ${result.attempt}, token ${result.token})`;
    case "already-done": {
      const { record } = result;
      const ended = record.endedAt === undefined ? "" : ` at ${iso(record.endedAt)}`;
      return `already done (attempt ${record.attempt} by ${record.holder}${ended})`;
    }
    case "running-elsewhere":
      return result.holder === null
        ? "running elsewhere"
        : `running elsewhere (held by ${result.holder.ownerId}, token ${result.holder.token})`;
    case "attempts-exhausted": {
      const { record } = result;
      const last = record.error === undefined ? "" : `; the last: ${record.error}`;
      return `attempts exhausted (${record.attempt} failed${last})`;
    }
    case "failed": {
      const n = result.attemptsLeft;
      const left = `${n} attempt${n === 1 ? "" : "s"} left`;
      return `failed (attempt ${result.attempt}, token ${result.token}, ${left}): ${messageOf(result.error)}`;
    }
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function messageOf(error: unknown): string {
  if (error instanceof RunTimeoutError) return `ran past --at-most ${error.atMostMs} ms; stopped`;
  return error instanceof Error ? error.message : String(error);
}
