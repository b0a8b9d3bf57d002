import { formatLogTail } from "./log-tail.js";
import type { ManagedProcess } from "./managed-process.js";
import { ServerStartError } from "./server-start-error.js";

/** Environment variable overriding how long a server may take to be ready. */
export const START_TIMEOUT_ENV = "BATON_SERVER_START_TIMEOUT_MS";

/** Default time allowed for a server group to become ready. */
export const DEFAULT_START_TIMEOUT_MS = 30_000;

/** The start timeout: `BATON_SERVER_START_TIMEOUT_MS` or 30 s. */
export function startTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  const value = Number(env[START_TIMEOUT_ENV]);
  return Number.isFinite(value) && value > 0 ? value : DEFAULT_START_TIMEOUT_MS;
}

/** What {@link waitForReady} waits for. */
export interface WaitForReadyOptions {
  /** Names the thing in messages, e.g. `"etcd cluster"`. */
  readonly what: string;
  /** Resolves true once ready; a rejection counts as "not yet". */
  readonly probe: () => Promise<boolean>;
  /** The processes behind it: if one exits, waiting stops at once. */
  readonly processes: readonly ManagedProcess[];
  /** Give up after this long. */
  readonly timeoutMs: number;
  /** Pause between probes, 50 ms by default. */
  readonly intervalMs?: number;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function describeExit(process: ManagedProcess): string {
  const info = process.exitInfo;
  if (info === undefined) return "running";
  return info.signal === null ? `exited with code ${info.code}` : `killed by ${info.signal}`;
}

/**
 * Polls `probe` until it says ready.
 *
 * @throws ServerStartError when a process exits first or the timeout passes;
 *   the message carries the tail of each process's log
 */
export async function waitForReady(options: WaitForReadyOptions): Promise<void> {
  const { what, probe, processes, timeoutMs, intervalMs = 50 } = options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    const dead = processes.filter((process) => !process.running);
    if (dead.length > 0) {
      const details = dead
        .map((process) => `${process.spec.name} (PID ${process.pid}) ${describeExit(process)}`)
        .join("; ");
      throw new ServerStartError(
        `${what} failed to start: ${details}\n${dead.map((p) => formatLogTail(p.spec.logFile)).join("\n")}`,
        dead.map((process) => process.spec.logFile),
      );
    }
    try {
      if (await probe()) {
        return;
      }
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const cause = lastError instanceof Error ? ` (last probe error: ${lastError.message})` : "";
      throw new ServerStartError(
        `${what} not ready after ${timeoutMs} ms${cause}\n${processes.map((p) => formatLogTail(p.spec.logFile)).join("\n")}`,
        processes.map((process) => process.spec.logFile),
      );
    }
    await sleep(intervalMs);
  }
}
