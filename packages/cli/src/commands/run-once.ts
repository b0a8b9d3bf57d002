import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  type RunOnceResult,
} from "@baton/core";
import { backendFrom, countOption, msOption, parse, usageFromConfig } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import { exitCodeOf, onSignals } from "../run-child.js";
import { SlotCommand } from "../slot-command.js";
import { describeResult, exitCodeOfResult } from "../slot-outcome.js";
import { UsageError } from "../usage-error.js";

export const RUN_ONCE_USAGE = `usage: baton run-once JOB SLOT [--backend URL] [--at-most MS] [--max-attempts N] [--wait MS]
       [--ttl MS] [--grace MS] -- CMD [ARGS...]

Runs CMD for slot SLOT of job JOB (e.g. baton run-once invoices 2026-12-01) unless the slot
is done or another replica is running it. The outcome is recorded in the store beside the
lock, so every replica that runs the same line for the same SLOT runs CMD once between them:
CMD exiting 0 marks the slot done for good; a non-zero exit (or a crash of this replica) is
recorded as a failed attempt, and the next call retries it, up to --max-attempts in all.
CMD gets BATON_JOB, BATON_SLOT, BATON_ATTEMPT (from 1), BATON_FENCING_TOKEN (send it with its
writes to a fenced store) and BATON_BACKEND. When CMD runs past --at-most or the lock is
lost, CMD gets SIGTERM, then SIGKILL after --grace. Signals sent to baton are forwarded to CMD.
These reach every process CMD started (its process group), whatever it leaves running when
it ends is stopped too, and if baton itself dies, even by SIGKILL, the group is killed.
Needs a backend that keeps records: memory, redis, etcd, zookeeper or postgres.

  --backend URL       store URL (or BATON_BACKEND), e.g. redis://127.0.0.1:6379
  --at-most MS        the longest one attempt may run (default 3600000)
  --max-attempts N    attempts the slot gets in all, crashed ones included (default 3)
  --wait MS           while another replica runs the slot, wait up to MS: to take over if it
                      fails, or to exit ${EXIT.alreadyDone} once it is done (default 0: exit ${EXIT.runningElsewhere} at once)
  --ttl MS            lease length of the slot's lock (default 15000)
  --grace MS          how long a stopped CMD has after SIGTERM before SIGKILL (default 5000)
  -h, --help          show this text
Exit codes: CMD's own when it ran (0: the slot is recorded done; otherwise recorded failed);
${EXIT.alreadyDone} already done; ${EXIT.runningElsewhere} running elsewhere; ${EXIT.attemptsExhausted} attempts exhausted (not run again);
${EXIT.overran} CMD ran past --at-most; ${EXIT.lost} lock lost while CMD ran; ${EXIT.unavailable} store unreachable;
${EXIT.usage} bad usage, or a backend that keeps no records; ${EXIT.cannotRun} CMD could not start.`;

/** The options `baton run-once` takes (besides -h, --help), each documented in {@link RUN_ONCE_USAGE}. */
export const RUN_ONCE_OPTIONS = {
  backend: { type: "string" },
  "at-most": { type: "string" },
  "max-attempts": { type: "string" },
  wait: { type: "string" },
  ttl: { type: "string" },
  grace: { type: "string" },
} as const;

/** `baton run-once`. Resolves with the exit code. */
export async function runOnceCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals, command } = parse(argv, RUN_ONCE_OPTIONS);
  if (values.help) {
    out(RUN_ONCE_USAGE);
    return 0;
  }
  const [job, slot] = jobAndSlot(positionals);
  if (command.length === 0) throw new UsageError(`missing CMD after --\n${RUN_ONCE_USAGE}`);
  const backend = backendFrom(values.backend, process.env);
  const atMostMs = msOption(values["at-most"], "at-most", 3_600_000, 1);
  const maxAttempts = countOption(values["max-attempts"], "max-attempts", 3, 1, 1_000);
  const waitMs = msOption(values.wait, "wait", 0, 0);
  const ttlMs = msOption(values.ttl, "ttl", 15_000, 10);
  const graceMs = msOption(values.grace, "grace", 5_000, 0);

  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend, ttlMs });
  const cmd = new SlotCommand(command, { BATON_BACKEND: backend }, graceMs);
  const cancel = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const stopForwarding = onSignals((signal) => {
    interrupted = signal;
    if (cmd.running) cmd.signal(signal);
    else cancel.abort(new Error(`baton: ${signal} before CMD started`));
  });
  let result: RunOnceResult<void>;
  try {
    result = await coordinator.runOnce(job, slot, cmd.run, {
      atMostMs,
      maxAttempts,
      waitMs,
      signal: cancel.signal,
    });
  } catch (error) {
    if (interrupted !== undefined && cancel.signal.aborted) {
      return exitCodeOf({ code: null, signal: interrupted });
    }
    return exitCodeOfError(error, err);
  } finally {
    await cmd.ended();
    stopForwarding();
    await coordinator.close().catch(() => undefined);
  }
  if (result.outcome !== "ran")
    err(`baton: job "${job}" slot "${slot}": ${describeResult(result)}`);
  return exitCodeOfResult(result);
}

/** The exit code of a `runOnce` call that threw before or after CMD (it did not decide). */
function exitCodeOfError(error: unknown, err: (s: string) => void): number {
  if (error instanceof ConfigError) throw usageFromConfig(error);
  if (error instanceof BackendUnavailableError) {
    err(`baton: ${error.message}`);
    return EXIT.unavailable;
  }
  throw error;
}

/** The JOB and SLOT positionals. */
function jobAndSlot(positionals: readonly string[]): [job: string, slot: string] {
  if (positionals.length === 2) return positionals as [string, string];
  if (positionals.length === 0) throw new UsageError(`missing JOB and SLOT\n${RUN_ONCE_USAGE}`);
  if (positionals.length === 1) throw new UsageError(`missing SLOT\n${RUN_ONCE_USAGE}`);
  throw new UsageError(`expected JOB and SLOT, got ${positionals.join(" ")}`);
}
