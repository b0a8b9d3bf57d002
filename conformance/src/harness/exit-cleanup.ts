/**
 * Last-resort cleanup when the process running the harness exits without
 * stopping its servers (an uncaught error, `process.exit()`, Ctrl-C).
 *
 * Tasks run synchronously from the `exit` event, in two phases: first every
 * `kill` task (SIGKILL the recorded servers), then every `files` task
 * (remove or report temp dirs). SIGINT, SIGTERM and SIGHUP also run the
 * tasks; when no one else listens for that signal, the signal is re-raised
 * so the process still dies the default way.
 */

/** When an exit-cleanup task runs: killing processes precedes touching files. */
export type ExitCleanupPhase = "kill" | "files";

/** A synchronous cleanup task; it receives the exit code, if known. */
export type ExitCleanupTask = (exitCode: number | undefined) => void;

const tasks: Record<ExitCleanupPhase, Set<ExitCleanupTask>> = {
  kill: new Set(),
  files: new Set(),
};

let installed = false;

function runAll(exitCode: number | undefined): void {
  for (const phase of ["kill", "files"] as const) {
    for (const task of [...tasks[phase]]) {
      tasks[phase].delete(task);
      try {
        task(exitCode);
      } catch {
        // Best effort: one failing task must not keep the others from running.
      }
    }
  }
}

function onSignal(signal: NodeJS.Signals): void {
  runAll(128 + (signal === "SIGINT" ? 2 : signal === "SIGHUP" ? 1 : 15));
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

function install(): void {
  if (installed) {
    return;
  }
  installed = true;
  process.on("exit", (code) => runAll(code));
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, onSignal);
  }
}

/**
 * Registers a task to run if the process exits before it is unregistered.
 *
 * @param phase - `kill` tasks run before `files` tasks
 * @param task - a synchronous function; asynchronous work would never finish
 * @returns a function that unregisters the task (call it after an orderly stop)
 */
export function addExitCleanup(phase: ExitCleanupPhase, task: ExitCleanupTask): () => void {
  install();
  tasks[phase].add(task);
  return () => {
    tasks[phase].delete(task);
  };
}
