import type { RunContext } from "@baton/core";
import { type ChildExit, type ChildRun, cannotRun, exitCodeOf, runChild } from "./run-child.js";

/** CMD of one attempt ended with a non-zero code, a signal, or could not start. */
export class CommandFailedError extends Error {
  /** How CMD ended. */
  readonly exit: ChildExit;

  constructor(command: readonly string[], exit: ChildExit) {
    super(describeExit(command, exit));
    this.name = "CommandFailedError";
    this.exit = exit;
  }
}

function describeExit(command: readonly string[], exit: ChildExit): string {
  const file = command[0] ?? "CMD";
  if (exit.spawnError !== undefined) return cannotRun(command, exit.spawnError);
  if (exit.code !== null) return `${file} exited with code ${exit.code}`;
  return `${file} was ended by ${exit.signal ?? "a signal"}`;
}

/**
 * CMD run as the `fn` of `runOnce` (once per attempt): with the attempt's token, job, slot and
 * number in its environment, stopped (SIGTERM, then SIGKILL after `graceMs`) when the
 * attempt's signal aborts, and failing the attempt unless it exits with code 0.
 */
export class SlotCommand {
  readonly #command: readonly string[];
  readonly #env: Record<string, string>;
  readonly #graceMs: number;
  #current: ChildRun | undefined;

  constructor(command: readonly string[], env: Record<string, string>, graceMs: number) {
    this.#command = command;
    this.#env = env;
    this.#graceMs = graceMs;
  }

  /** True while CMD of an attempt is running. */
  get running(): boolean {
    return this.#current !== undefined;
  }

  /** The `fn` to hand to `runOnce` or `schedule`. */
  readonly run = async (context: RunContext): Promise<void> => {
    const { signal } = context;
    signal.throwIfAborted();
    const child = runChild(
      this.#command,
      {
        ...this.#env,
        BATON_JOB: context.job,
        BATON_SLOT: context.slot,
        BATON_ATTEMPT: `${context.attempt}`,
        BATON_FENCING_TOKEN: `${context.token}`,
      },
      this.#graceMs,
    );
    this.#current = child;
    const stop = () => void child.stop();
    signal.addEventListener("abort", stop, { once: true });
    try {
      const exit = await child.exited;
      if (exit.spawnError !== undefined || exitCodeOf(exit) !== 0) {
        throw new CommandFailedError(this.#command, exit);
      }
    } finally {
      signal.removeEventListener("abort", stop);
      if (this.#current === child) this.#current = undefined;
    }
  };

  /** Sends `signal` to CMD, if it is running (forwarding). */
  signal(signal: NodeJS.Signals): void {
    this.#current?.signal(signal);
  }

  /**
   * Resolves once no CMD runs. `runOnce` stops awaiting an attempt whose signal aborted; CMD
   * is then being stopped, and baton waits for it to end before it goes on or exits.
   */
  async ended(): Promise<void> {
    while (this.#current !== undefined) await this.#current.exited;
  }
}
