import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";

/** How a command ended. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The command could not be started (not found, not executable). */
  readonly spawnError?: Error;
}

/** A running command. */
export interface ChildRun {
  /** Settles once the command has ended. */
  readonly exited: Promise<ChildExit>;
  /** Sends `signal` to the command (forwarding). */
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after `graceMs` if it is still running; resolves when it ended. */
  stop(graceMs: number): Promise<ChildExit>;
}

/**
 * On Linux, `setpriv --pdeathsig SIGKILL` (util-linux) makes the kernel kill the command if
 * baton itself dies (SIGKILL, OOM), so a command never outlives the lock that guards it.
 * setpriv execs the command, so its PID, exit code and signals are the command's own.
 */
const SETPRIV =
  process.platform === "linux" && existsSync("/usr/bin/setpriv") ? "/usr/bin/setpriv" : undefined;

/** Starts `command` with stdio inherited and `env` added to baton's own environment. */
export function runChild(command: readonly string[], env: Record<string, string>): ChildRun {
  const [file, ...args] = command as [string, ...string[]];
  const argv =
    SETPRIV === undefined
      ? [file, ...args]
      : [SETPRIV, "--pdeathsig", "SIGKILL", "--", file, ...args];
  const child = spawn(argv[0] as string, argv.slice(1), {
    stdio: "inherit",
    env: { ...process.env, ...env },
  });
  let ended = false;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once("error", (error) => {
      ended = true;
      resolve({ code: null, signal: null, spawnError: error });
    });
    child.once("exit", (code, signal) => {
      ended = true;
      resolve({ code, signal });
    });
  });
  return {
    exited,
    signal(signal) {
      if (!ended) child.kill(signal);
    },
    async stop(graceMs) {
      if (!ended) child.kill("SIGTERM");
      const timer = setTimeout(() => {
        if (!ended) child.kill("SIGKILL");
      }, graceMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

/** The exit code a shell would report for `exit`: the code, or 128 + the signal number. */
export function exitCodeOf(exit: ChildExit): number {
  if (exit.spawnError !== undefined) return 127;
  if (exit.code !== null) return exit.code;
  const number = exit.signal ? constants.signals[exit.signal] : undefined;
  return 128 + (number ?? 0);
}

/** Signals baton forwards to the command it runs. */
export const FORWARDED: readonly NodeJS.Signals[] = [
  "SIGTERM",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
  "SIGUSR1",
  "SIGUSR2",
];

/** Routes each forwarded signal to `handler` until the returned function is called. */
export function onSignals(handler: (signal: NodeJS.Signals) => void): () => void {
  const listeners = FORWARDED.map((s) => {
    const listener = () => handler(s);
    process.on(s, listener);
    return [s, listener] as const;
  });
  return () => {
    for (const [s, l] of listeners) process.off(s, l);
  };
}
