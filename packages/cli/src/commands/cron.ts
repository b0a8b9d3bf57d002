import { ConfigError, createCoordinator, type Schedule } from "@baton/core";
import { backendFrom, countOption, msOption, parse, usageFromConfig } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import { onSignals } from "../run-child.js";
import { CommandFailedError, SlotCommand } from "../slot-command.js";
import { describeResult } from "../slot-outcome.js";
import { UsageError } from "../usage-error.js";

export const CRON_USAGE = `usage: baton cron CRON JOB [--backend URL] [--timezone TZ] [--at-most MS] [--catch-up MS]
       [--max-attempts N] [--ttl MS] [--grace MS] -- CMD [ARGS...]

Runs until stopped, and runs CMD for each tick of CRON (e.g. "0 2 * * *": at 02:00 every day;
a sixth leading field counts seconds) that this replica wins. Start the same line on every
replica: each tick is a slot named after its instant in UTC (2026-12-01T02:00:00Z), run once
between all of them, as baton run-once runs it. A replica whose timer fires while another
runs the slot waits, and takes over if that run fails or its replica dies. One line per slot
on stdout: JOB SLOT ran | already done | failed | running elsewhere | attempts exhausted.
CMD gets BATON_JOB, BATON_SLOT, BATON_ATTEMPT, BATON_FENCING_TOKEN and BATON_BACKEND; past
--at-most or on a lost lock it gets SIGTERM, then SIGKILL after --grace. SIGINT or SIGTERM
stops baton: a CMD under way is stopped the same way and its attempt recorded as failed, so
another replica retries it; then baton exits 0. Stopping reaches every process CMD started
(its process group), whatever it leaves running when it ends is stopped too, and if baton
itself dies, even by SIGKILL, the group is killed.
Needs a backend that keeps records: memory, redis, etcd, zookeeper or postgres.

  --backend URL       store URL (or BATON_BACKEND), e.g. redis://127.0.0.1:6379
  --timezone TZ       the IANA time zone CRON is read in (default UTC); the same on every replica
  --at-most MS        the longest one attempt may run (default 3600000)
  --catch-up MS       at start, run the latest tick at most MS in the past if it is not done
                      (default 0: ticks before the start are not run); ticks missed while a
                      run lasts are handled the same way: the latest within MS runs next
  --max-attempts N    attempts each slot gets in all, crashed ones included (default 3)
  --ttl MS            lease length of each slot's lock (default 15000)
  --grace MS          how long a stopped CMD has after SIGTERM before SIGKILL (default 5000)
  -h, --help          show this text
Exit codes: 0 stopped by SIGINT or SIGTERM; ${EXIT.usage} bad usage (a bad CRON or --timezone), or a
backend that keeps no records.`;

/** The options `baton cron` takes (besides -h, --help), each documented in {@link CRON_USAGE}. */
export const CRON_OPTIONS = {
  backend: { type: "string" },
  timezone: { type: "string" },
  "at-most": { type: "string" },
  "catch-up": { type: "string" },
  "max-attempts": { type: "string" },
  ttl: { type: "string" },
  grace: { type: "string" },
} as const;

/** Signals that stop `baton cron`; the other forwarded ones go to a CMD under way. */
const STOPPING: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];

/**
 * `baton cron`. Resolves with the exit code once stopped: by SIGINT, SIGTERM (or SIGHUP,
 * SIGQUIT), by `stop` aborting, or by an error that no later tick can get past.
 */
export async function cronCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
  stop?: AbortSignal,
): Promise<number> {
  const { values, positionals, command } = parse(argv, CRON_OPTIONS);
  if (values.help) {
    out(CRON_USAGE);
    return 0;
  }
  const [cron, job] = cronAndJob(positionals);
  if (command.length === 0) throw new UsageError(`missing CMD after --\n${CRON_USAGE}`);
  const backend = backendFrom(values.backend, process.env);
  const timezone = typeof values.timezone === "string" ? values.timezone : "UTC";
  const atMostMs = msOption(values["at-most"], "at-most", 3_600_000, 1);
  const catchUpMs = msOption(values["catch-up"], "catch-up", 0, 0, 366 * 86_400_000);
  const maxAttempts = countOption(values["max-attempts"], "max-attempts", 3, 1, 1_000);
  const ttlMs = msOption(values.ttl, "ttl", 15_000, 10);
  const graceMs = msOption(values.grace, "grace", 5_000, 0);

  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend, ttlMs });
  const cmd = new SlotCommand(command, { BATON_BACKEND: backend }, graceMs);
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  coordinator.on("backgroundError", ({ error, during }) => {
    if (error instanceof ConfigError) {
      // No later tick fares better (a backend that keeps no records): stop.
      err(`baton: ${usageFromConfig(error).message}`);
      finish(EXIT.usage);
      return;
    }
    // CMD of an attempt stopped past --at-most or on stop: its slot's line said so already.
    if (error instanceof CommandFailedError) return;
    err(`baton: ${during}: ${error instanceof Error ? error.message : String(error)}`);
  });
  const off = onSignals((signal) => {
    if (STOPPING.includes(signal)) finish(0);
    else cmd.signal(signal);
  });
  const onStop = () => finish(0);
  stop?.addEventListener("abort", onStop, { once: true });
  if (stop?.aborted) finish(0);
  try {
    return await runSchedule();
  } finally {
    off();
    stop?.removeEventListener("abort", onStop);
    await coordinator.close().catch(() => undefined);
  }

  async function runSchedule(): Promise<number> {
    let schedule: Schedule;
    try {
      schedule = coordinator.schedule(cron, job, cmd.run, {
        timezone,
        atMostMs,
        catchUpMs,
        maxAttempts,
        onResult: (result, slot) => out(`${job} ${slot} ${describeResult(result)}`),
      });
    } catch (error) {
      if (error instanceof ConfigError) throw usageFromConfig(error);
      throw error;
    }
    const next = schedule.nextRun();
    if (next === null) {
      await schedule.stop();
      throw new UsageError(`CRON: "${cron}" has no tick from now on`);
    }
    err(`baton: job "${job}" on "${cron}" (${timezone}); next slot ${next.toISOString()}`);
    const code = await finished;
    await schedule.stop(); // aborts the attempt under way: CMD gets SIGTERM
    await cmd.ended();
    return code;
  }
}

/** The CRON and JOB positionals. */
function cronAndJob(positionals: readonly string[]): [cron: string, job: string] {
  if (positionals.length === 2) return positionals as [string, string];
  if (positionals.length === 0) throw new UsageError(`missing CRON and JOB\n${CRON_USAGE}`);
  if (positionals.length === 1) throw new UsageError(`missing JOB\n${CRON_USAGE}`);
  throw new UsageError(
    `expected CRON and JOB, got ${positionals.join(" ")} (quote CRON: "0 2 * * *")`,
  );
}
