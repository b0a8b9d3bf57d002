import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
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
  /**
   * Settles once the command has ended, and with it every process it started: `code` and
   * `signal` are those of the command itself.
   */
  readonly exited: Promise<ChildExit>;
  /** Sends `signal` to the command (forwarding); see {@link FORWARDED}. */
  signal(signal: NodeJS.Signals): void;
  /**
   * `signal` (SIGTERM by default) to the command and every process it started, then SIGKILL
   * to those still running after the grace period; resolves when they have all ended.
   */
  stop(signal?: NodeJS.Signals): Promise<ChildExit>;
}

/**
 * Where the system has process groups (everywhere but Windows), the command runs as the
 * leader of a process group of its own, and baton signals the whole group, so that what the
 * command started (`sleep 300 &` in a script, a worker pool) stops with it.
 */
const GROUPS = process.platform !== "win32";

/**
 * The guard of a command's process group: a shell that reads the group's id from its standard
 * input, waits for that input to close, and then SIGKILLs the group. Baton holds the other end
 * of the pipe and SIGKILLs the guard once the group is gone; when baton itself dies, even by
 * SIGKILL, the kernel closes the pipe and the guard ends the command and everything it
 * started, so no part of it outlives the lock. The guard starts before the command, so that
 * no moment of the command is unguarded, and ignores the signals a terminal or a service
 * manager sends to stop baton.
 */
const GUARD_SCRIPT = `trap '' INT TERM HUP QUIT
read -r group || exit 0
read -r _
kill -s KILL -- "-$group" 2>/dev/null`;

/** How often baton looks whether a process group has ended, while waiting for it to. */
const POLL_MS = 20;

/** How long a group may take to disappear after SIGKILL (processes in uninterruptible I/O). */
const KILLED_WAIT_MS = 5_000;

/** Where the process table can be read (Linux): to tell running processes from zombies. */
const PROC = process.platform === "linux" && existsSync("/proc/self/stat");

/**
 * True while the process group `pgid` has a member that still runs. A member that has ended
 * but was not reaped yet (a zombie) does not count: where init does not reap orphans, as in
 * some containers, it would never go away.
 */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  return PROC ? runsInGroup(pgid) : true;
}

/** True when `/proc` lists a process of group `pgid` that is not a zombie. */
function runsInGroup(pgid: number): boolean {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // ended meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (pgrp === `${pgid}` && state !== "Z" && state !== "X") return true;
  }
  return false;
}

/** Sends `signal` to the process group `pgid`, if it still has a member. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group has ended already.
  }
}

function startGuard(): ChildProcess {
  const guard = spawn("/bin/sh", ["-c", GUARD_SCRIPT, "baton-guard"], {
    stdio: ["pipe", "ignore", "ignore"],
    detached: true,
  });
  guard.on("error", () => undefined); // no shell: the command still runs, unguarded
  guard.stdin?.on("error", () => undefined);
  return guard;
}

/**
 * Starts `command` with stdio inherited and `env` added to baton's own environment. `graceMs`
 * is how long the command and what it started have between SIGTERM and SIGKILL when stopped,
 * and how long what it started has to end after the command itself ended.
 */
export function runChild(
  command: readonly string[],
  env: Record<string, string>,
  graceMs: number,
): ChildRun {
  const [file, ...args] = command as [string, ...string[]];
  let guard = GROUPS ? startGuard() : undefined;
  const child = spawn(file, args, {
    stdio: "inherit",
    env: { ...process.env, ...env },
    detached: GROUPS,
  });
  const pgid = GROUPS ? child.pid : undefined;
  if (pgid === undefined) {
    guard?.kill("SIGKILL"); // the command did not start: nothing to guard
    guard?.stdin?.destroy();
    guard = undefined;
  } else guard?.stdin?.write(`${pgid}\n`);
  let leaderEnded = false;
  let terminated = false;
  let killTimer: NodeJS.Timeout | undefined;

  const send = (signal: NodeJS.Signals) => {
    if (pgid !== undefined) signalGroup(pgid, signal);
    else if (!leaderEnded) child.kill(signal);
  };
  const terminate = (signal: NodeJS.Signals) => {
    if (terminated) return;
    terminated = true;
    send(signal);
    killTimer = setTimeout(() => send("SIGKILL"), graceMs);
  };

  /** Once the command has ended: stops what it left running, then dismisses the guard. */
  const clearGroup = async () => {
    if (pgid !== undefined && groupAlive(pgid)) {
      terminate("SIGTERM");
      const started = performance.now();
      while (groupAlive(pgid) && performance.now() - started < graceMs + KILLED_WAIT_MS) {
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    }
    clearTimeout(killTimer);
    if (guard !== undefined) {
      guard.kill("SIGKILL");
      guard.stdin?.destroy();
    }
  };

  const exited = new Promise<ChildExit>((resolve) => {
    child.once("error", (error) => {
      if (leaderEnded) return;
      leaderEnded = true;
      void clearGroup().then(() => resolve({ code: null, signal: null, spawnError: error }));
    });
    child.once("exit", (code, signal) => {
      if (leaderEnded) return;
      leaderEnded = true;
      void clearGroup().then(() => resolve({ code, signal }));
    });
  });
  return {
    exited,
    signal(signal) {
      if (signal === "SIGUSR1" || signal === "SIGUSR2") {
        // The command's own business (reload, dump): its processes may not all handle them.
        if (!leaderEnded) child.kill(signal);
        return;
      }
      send(signal);
    },
    async stop(signal = "SIGTERM") {
      terminate(signal);
      return await exited;
    },
  };
}

/** Why `command` could not start, as baton prints it: `cannot run ./job.sh: no such file`. */
export function cannotRun(command: readonly string[], error: Error): string {
  const file = command[0] ?? "CMD";
  const code = (error as NodeJS.ErrnoException).code;
  const why =
    code === "ENOENT"
      ? file.includes("/")
        ? "no such file (or the interpreter its #! line names is missing)"
        : "command not found on PATH"
      : code === "EACCES"
        ? "permission denied (is it executable?)"
        : error.message;
  return `cannot run ${file}: ${why}`;
}

/** The exit code a shell would report for `exit`: the code, or 128 + the signal number. */
export function exitCodeOf(exit: ChildExit): number {
  if (exit.spawnError !== undefined) return 127;
  if (exit.code !== null) return exit.code;
  const number = exit.signal ? constants.signals[exit.signal] : undefined;
  return 128 + (number ?? 0);
}

/**
 * Signals baton forwards to the command it runs: SIGTERM, SIGINT, SIGHUP and SIGQUIT to the
 * command and every process it started, as a terminal would; SIGUSR1 and SIGUSR2 to the
 * command alone.
 */
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
