import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { basename } from "node:path";
import { addExitCleanup } from "./exit-cleanup.js";
import { findOnPath } from "./find-on-path.js";
import {
  checkIdentity,
  type ProcessIdentity,
  readCmdline,
  readProcessState,
  readStartTime,
  type SignalOutcome,
  signalIfSame,
} from "./process-identity.js";

/** How to launch one server process. */
export interface ProcessSpec {
  /** A short name for messages, e.g. `"etcd e2"`. */
  readonly name: string;
  /** The program to run, spawned directly (never through a shell). */
  readonly command: string;
  /** Its arguments. */
  readonly args: readonly string[];
  /** Working directory. */
  readonly cwd?: string;
  /** Extra environment variables, merged over `process.env`. */
  readonly env?: Readonly<Record<string, string>>;
  /** stdout and stderr are appended to this file. */
  readonly logFile: string;
  /**
   * Run as this user (through `setpriv`) when the harness runs as root;
   * ignored otherwise. PostgreSQL refuses to run as root.
   */
  readonly runAsUser?: string;
  /** The polite stop signal: SIGTERM by default, SIGINT for PostgreSQL. */
  readonly stopSignal?: NodeJS.Signals;
  /**
   * Program names that identify the process in `/proc/PID/cmdline`;
   * defaults to the basename of `command`.
   */
  readonly programs?: readonly string[];
}

/** How a process ended. */
export interface ExitInfo {
  /** The exit code, or null when a signal ended it. */
  readonly code: number | null;
  /** The signal that ended it, or null. */
  readonly signal: NodeJS.Signals | null;
}

/** Default time a server gets between its stop signal and SIGKILL. */
export const DEFAULT_STOP_GRACE_MS = 10_000;

function launchCommand(spec: ProcessSpec): { command: string; args: string[] } {
  const setpriv = findOnPath("setpriv");
  const runAsRoot = process.getuid?.() === 0;
  const wrapper: string[] = [];
  if (spec.runAsUser !== undefined && runAsRoot) {
    if (setpriv === undefined) {
      throw new Error(
        `${spec.name}: running as root needs setpriv (util-linux) to drop to ${spec.runAsUser}`,
      );
    }
    wrapper.push(`--reuid=${spec.runAsUser}`, `--regid=${spec.runAsUser}`, "--init-groups");
  }
  if (setpriv === undefined) {
    return { command: spec.command, args: [...spec.args] };
  }
  // setpriv execs the server, so the PID stays the server's own; the
  // parent-death signal kills the server even if the runner is SIGKILLed.
  return {
    command: setpriv,
    args: [...wrapper, "--pdeathsig", "SIGKILL", "--", spec.command, ...spec.args],
  };
}

/** A never-notified cell for short synchronous waits. */
const pauseClock = new Int32Array(new SharedArrayBuffer(4));

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * One server process started by the harness, stopped only by its recorded
 * PID after checking that the PID still names the same program.
 *
 * The process is spawned directly (no shell) as the leader of its own
 * process group, with output appended to a log file. Until it exits it is
 * registered for SIGKILL on an unexpected exit of the runner.
 */
export class ManagedProcess {
  /** The recorded process ID. */
  readonly pid: number;
  /** What the PID must still name before it is signalled. */
  readonly identity: ProcessIdentity;
  /** The spec it was started from (reused by restarts). */
  readonly spec: ProcessSpec;
  /** Resolves when the process has exited (and been reaped). */
  readonly exited: Promise<ExitInfo>;

  #exitInfo: ExitInfo | undefined;
  readonly #unregister: () => void;

  private constructor(spec: ProcessSpec, child: ChildProcess, pid: number) {
    this.spec = spec;
    this.pid = pid;
    this.identity = {
      pid,
      programs: spec.programs ?? [basename(spec.command)],
      startTime: readStartTime(pid),
    };
    this.#unregister = addExitCleanup("kill", () => this.killNow());
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.#exitInfo = { code, signal };
        this.#unregister();
        resolve({ code, signal });
      });
    });
  }

  /**
   * Spawns a process from `spec`.
   *
   * @throws Error when the program cannot be spawned (e.g. ENOENT)
   */
  static async start(spec: ProcessSpec): Promise<ManagedProcess> {
    const { command, args } = launchCommand(spec);
    const log = openSync(spec.logFile, "a");
    let child: ChildProcess;
    try {
      child = spawn(command, args, {
        cwd: spec.cwd,
        env: { ...process.env, ...spec.env },
        stdio: ["ignore", log, log],
        detached: true,
      });
    } finally {
      closeSync(log);
    }
    const pid = child.pid;
    if (pid === undefined) {
      const error = await new Promise<Error>((resolve) => child.once("error", resolve));
      throw new Error(`${spec.name}: cannot start ${spec.command}: ${error.message}`);
    }
    child.on("error", () => {
      // Errors after a successful spawn (e.g. a failed kill) are handled by callers.
    });
    const managed = new ManagedProcess(spec, child, pid);
    await managed.#waitForExec();
    return managed;
  }

  /**
   * Waits (at most 2 s) until the PID names the server program: a launcher
   * such as setpriv execs it a moment after the spawn returns. Returns early
   * when the process exits.
   */
  async #waitForExec(): Promise<void> {
    const deadline = Date.now() + 2000;
    while (this.running && Date.now() < deadline) {
      if (
        checkIdentity(this.identity).status !== "mismatch" &&
        (readCmdline(this.pid)?.length ?? 0) > 0
      ) {
        return;
      }
      await sleep(2);
    }
  }

  /** True until the process has exited. */
  get running(): boolean {
    return this.#exitInfo === undefined;
  }

  /** How the process ended, once it has. */
  get exitInfo(): ExitInfo | undefined {
    return this.#exitInfo;
  }

  /**
   * Sends a signal after the identity check.
   *
   * @param signal - the signal
   * @param group - signal the whole process group led by this process
   * @throws Error when the PID no longer names this program
   */
  signal(signal: NodeJS.Signals, group = false): SignalOutcome {
    if (!this.running) {
      return "gone";
    }
    const outcome = signalIfSame(this.identity, signal, group);
    if (outcome === "mismatch") {
      const check = checkIdentity(this.identity);
      const reason = check.status === "mismatch" ? check.reason : "identity changed";
      throw new Error(`${this.spec.name}: refusing to send ${signal}: ${reason}`);
    }
    return outcome;
  }

  /**
   * Freezes the process group with SIGSTOP and waits (at most 500 ms,
   * synchronously) until the kernel reports the process as stopped, so the
   * server is frozen when this returns.
   */
  pause(): void {
    if (this.signal("SIGSTOP", true) !== "sent") {
      return;
    }
    const deadline = Date.now() + 500;
    while (readProcessState(this.pid) !== "T" && Date.now() < deadline) {
      Atomics.wait(pauseClock, 0, 0, 1);
    }
  }

  /** Thaws the process group with SIGCONT. */
  resume(): void {
    this.signal("SIGCONT", true);
  }

  /**
   * Stops the process: SIGCONT (it may be paused), then its stop signal
   * (SIGTERM, or SIGINT for PostgreSQL), then SIGKILL to its process group
   * after `graceMs`.
   *
   * @param graceMs - time allowed for a clean shutdown
   * @returns how it exited
   */
  async stop(graceMs = DEFAULT_STOP_GRACE_MS): Promise<ExitInfo> {
    if (!this.running) {
      return this.exited;
    }
    this.signal("SIGCONT", true);
    this.signal(this.spec.stopSignal ?? "SIGTERM");
    const timedOut = await Promise.race([
      this.exited.then(() => false),
      sleep(graceMs).then(() => true),
    ]);
    if (timedOut) {
      return this.kill();
    }
    return this.exited;
  }

  /**
   * Kills the process group with SIGKILL and waits for the exit.
   *
   * @returns how it exited
   * @throws Error when it has not exited 10 s after SIGKILL
   */
  async kill(): Promise<ExitInfo> {
    if (!this.running) {
      return this.exited;
    }
    this.signal("SIGKILL", true);
    const timedOut = await Promise.race([
      this.exited.then(() => false),
      sleep(10_000).then(() => true),
    ]);
    if (timedOut) {
      throw new Error(`${this.spec.name}: PID ${this.pid} did not exit after SIGKILL`);
    }
    return this.exited;
  }

  /**
   * Synchronous SIGCONT + SIGKILL of the process group, for exit handlers.
   * Never throws; does nothing when the PID no longer names this program.
   */
  killNow(): void {
    if (!this.running) {
      return;
    }
    try {
      if (signalIfSame(this.identity, "SIGCONT", true) === "sent") {
        signalIfSame(this.identity, "SIGKILL", true);
      }
    } catch {
      // Best effort during exit.
    }
  }
}
