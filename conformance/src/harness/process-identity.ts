import { readFileSync } from "node:fs";
import { basename } from "node:path";

/**
 * What a recorded PID is expected to be. Used before every signal so a PID
 * that the kernel has since handed to another program is never signalled.
 */
export interface ProcessIdentity {
  /** The process ID recorded at spawn. */
  readonly pid: number;
  /**
   * Accepted program names: the basename of `argv[0]` (servers that rewrite
   * their process title, like redis-server, keep their name first).
   */
  readonly programs: readonly string[];
  /**
   * The kernel start time of the process (field 22 of `/proc/PID/stat`),
   * recorded at spawn. When set, a different start time means the PID was
   * reused.
   */
  readonly startTime?: string | undefined;
}

/** Result of comparing a live PID with a {@link ProcessIdentity}. */
export type IdentityCheck =
  | { readonly status: "same" }
  | { readonly status: "gone" }
  | { readonly status: "mismatch"; readonly reason: string };

/**
 * Reads `/proc/PID/cmdline` as its NUL-separated arguments.
 *
 * @returns the arguments, an empty array for a zombie or kernel thread, or
 *   `undefined` when there is no such process
 */
export function readCmdline(pid: number): string[] | undefined {
  let raw: string;
  try {
    raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return undefined;
  }
  const args = raw.split("\0");
  if (args.at(-1) === "") {
    args.pop();
  }
  return args;
}

/** The fields of `/proc/PID/stat` after the `(comm)` field, or undefined. */
function readStatFields(pid: number): string[] | undefined {
  let raw: string;
  try {
    raw = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const end = raw.lastIndexOf(")");
  if (end < 0) {
    return undefined;
  }
  return raw
    .slice(end + 2)
    .trim()
    .split(" ");
}

/**
 * Reads the kernel start time of a process (clock ticks since boot).
 * Together with the PID it identifies one process for the machine's uptime.
 *
 * @returns the start time, or `undefined` when there is no such process
 */
export function readStartTime(pid: number): string | undefined {
  // Fields after "(comm)" start at field 3 (state); starttime is field 22.
  return readStatFields(pid)?.[19];
}

/**
 * The one-letter scheduler state of a process from `/proc/PID/stat`
 * (`R` running, `S` sleeping, `T` stopped, `Z` zombie, ...).
 *
 * @returns the state, or `undefined` when there is no such process
 */
export function readProcessState(pid: number): string | undefined {
  return readStatFields(pid)?.[0];
}

/** True when the process is a zombie (exited, not yet reaped). */
function isZombie(pid: number): boolean {
  return readProcessState(pid) === "Z";
}

/** The candidate program names of a command line. */
function programNames(cmdline: readonly string[]): string[] {
  const first = cmdline[0] ?? "";
  const firstToken = first.split(/\s+/)[0] ?? "";
  return [basename(first), basename(firstToken)];
}

/**
 * Checks whether `identity.pid` still names the recorded program.
 *
 * - `gone`: no such process, or only a zombie is left;
 * - `mismatch`: the PID now belongs to a different program or a process
 *   started at another time (PID reuse);
 * - `same`: safe to signal.
 */
export function checkIdentity(identity: ProcessIdentity): IdentityCheck {
  const cmdline = readCmdline(identity.pid);
  if (cmdline === undefined || (cmdline.length === 0 && isZombie(identity.pid))) {
    return { status: "gone" };
  }
  // An empty cmdline on a live process is an execve in progress (e.g.
  // setpriv becoming the server): only the start time can vouch for it.
  const execInProgress = cmdline.length === 0 && identity.startTime !== undefined;
  const names = programNames(cmdline);
  if (!execInProgress && !names.some((name) => identity.programs.includes(name))) {
    return {
      status: "mismatch",
      reason: `PID ${identity.pid} now runs ${JSON.stringify(cmdline.join(" ").slice(0, 200))}, expected ${identity.programs.join(" or ")}`,
    };
  }
  if (identity.startTime !== undefined) {
    const startTime = readStartTime(identity.pid);
    if (startTime === undefined) {
      return { status: "gone" };
    }
    if (startTime !== identity.startTime) {
      return {
        status: "mismatch",
        reason: `PID ${identity.pid} was reused: start time ${startTime}, expected ${identity.startTime}`,
      };
    }
  }
  return { status: "same" };
}

/** What {@link signalIfSame} did. */
export type SignalOutcome = "sent" | "gone" | "mismatch";

/**
 * Sends `signal` to the recorded process only if {@link checkIdentity} says
 * it is still the same program.
 *
 * @param identity - the recorded process
 * @param signal - the signal to send
 * @param group - also signal the process group led by the PID (the harness
 *   starts every server as a group leader, so e.g. PostgreSQL backends are
 *   paused together with the postmaster)
 * @returns `sent`, `gone` (nothing to signal) or `mismatch` (refused)
 */
export function signalIfSame(
  identity: ProcessIdentity,
  signal: NodeJS.Signals,
  group = false,
): SignalOutcome {
  const check = checkIdentity(identity);
  if (check.status !== "same") {
    return check.status;
  }
  try {
    process.kill(group ? -identity.pid : identity.pid, signal);
    return "sent";
  } catch (error) {
    if (group) {
      try {
        process.kill(identity.pid, signal);
        return "sent";
      } catch {
        return "gone";
      }
    }
    if ((error as NodeJS.ErrnoException).code === "ESRCH") {
      return "gone";
    }
    throw error;
  }
}
