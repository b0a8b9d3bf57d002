import { readFileSync } from "node:fs";
import { BackendUnavailableError, ConfigError } from "@baton/core";
import { usageFromConfig } from "./args.js";
import { COMPARE_USAGE, compareCommand } from "./commands/compare.js";
import { CRON_USAGE, cronCommand } from "./commands/cron.js";
import { DASHBOARD_USAGE, dashboardCommand } from "./commands/dashboard.js";
import { DEMO_USAGE, demoCommand } from "./commands/demo.js";
import { ELECT_USAGE, electCommand } from "./commands/elect.js";
import { LOCK_USAGE, lockCommand } from "./commands/lock.js";
import { LS_USAGE, lsCommand } from "./commands/ls.js";
import { RELEASE_USAGE, releaseCommand } from "./commands/release.js";
import { RUN_ONCE_USAGE, runOnceCommand } from "./commands/run-once.js";
import { STATUS_USAGE, statusCommand } from "./commands/status.js";
import { TOP_USAGE, topCommand } from "./commands/top.js";
import { EXIT } from "./exit-codes.js";
import { UsageError } from "./usage-error.js";

export const USAGE = `usage: baton <command> [options]

Commands:
  lock NAME -- CMD     run CMD while holding the lock NAME (--permits N: a permit of the
                       semaphore NAME; --read or --write: the read-write lock NAME)
  elect NAME -- CMD    run CMD only while this instance leads NAME
  run-once JOB SLOT -- CMD
                       run CMD once for SLOT across every replica; the outcome is recorded
  cron CRON JOB -- CMD run CMD once per tick of CRON across every replica (long-running)
  status NAME          show who holds NAME (--watch, --json; --permits for its permits)
  ls [PREFIX]          list every lock, semaphore, election and job held or waited for
  top [PREFIX]         the same, refreshed about once a second until Ctrl-C
  release NAME --force --reason TEXT
                       free NAME whoever holds it; its holder loses it (reason "revoked")
  dashboard [PREFIX]   a live web page of the same, with a timeline (127.0.0.1:7470)
  demo                 the invoice story (lock only, + signal, + fence) and the nightly scene
  compare              the invoice story on several backends, with a report and timelines

The store comes from --backend URL or BATON_BACKEND: memory://, redis://host:6379,
redlock://h1:6379,h2:6379,h3:6379, etcd://h1:2379,h2:2379, zookeeper://h1:2181/chroot,
postgres://user@host/db, mysql://user@host/db. 'baton <command> --help' for each command;
'baton --version' (-V) prints the version.`;

const USAGES: Record<string, string> = {
  lock: LOCK_USAGE,
  elect: ELECT_USAGE,
  "run-once": RUN_ONCE_USAGE,
  cron: CRON_USAGE,
  status: STATUS_USAGE,
  ls: LS_USAGE,
  top: TOP_USAGE,
  release: RELEASE_USAGE,
  dashboard: DASHBOARD_USAGE,
  demo: DEMO_USAGE,
  compare: COMPARE_USAGE,
};

/** The version of this package, as `baton --version` prints it. */
export function cliVersion(): string {
  // package.json sits one level above both src/ (sources) and dist/ (the build).
  const text = readFileSync(new URL("../package.json", import.meta.url), "utf8");
  return (JSON.parse(text) as { version: string }).version;
}

/** Runs `baton` with `argv` (without node and script); resolves with the exit code. */
export async function main(
  argv: readonly string[],
  out: (s: string) => void = (s) => process.stdout.write(`${s}\n`),
  err: (s: string) => void = (s) => process.stderr.write(`${s}\n`),
): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "lock":
        return await lockCommand(rest, out, err);
      case "elect":
        return await electCommand(rest, out, err);
      case "run-once":
        return await runOnceCommand(rest, out, err);
      case "cron":
        return await cronCommand(rest, out, err);
      case "status":
        return await statusCommand(rest, out, err);
      case "ls":
        return await lsCommand(rest, out);
      case "top":
        return await topCommand(rest, out);
      case "release":
        return await releaseCommand(rest, out, err);
      case "dashboard":
        return await dashboardCommand(rest, out, err);
      case "demo":
        return await demoCommand(rest, out);
      case "compare":
        return await compareCommand(rest, out, err);
      case "--version":
      case "-V":
      case "version":
        out(cliVersion());
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        out(USAGE);
        return command === undefined ? EXIT.usage : 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof BackendUnavailableError) {
      err(`baton: ${error.message}`);
      return EXIT.unavailable;
    }
    if (error instanceof UsageError || error instanceof ConfigError) {
      // A library ConfigError (from createCoordinator or the store) names the flag, not the field.
      const usage = error instanceof ConfigError ? usageFromConfig(error) : error;
      err(`baton: ${usage.message}`);
      if (command !== undefined && USAGES[command] === undefined) err(USAGE);
      return EXIT.usage;
    }
    err(`baton: ${(error as Error).stack ?? String(error)}`);
    return 1;
  }
}
