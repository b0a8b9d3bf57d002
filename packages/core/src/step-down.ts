import type { Coordinator } from "./coordinator.js";

/** @internal Every coordinator not yet closed, for step-down. */
export const liveCoordinators = new Set<Coordinator>();

/**
 * Steps down everywhere in this process: every election resigns (its `onRevoked` runs),
 * every lock is released and every coordinator closes, so followers take over within a few
 * round trips instead of waiting a TTL. Call it from your own shutdown code; resolves when
 * done (failures are reported on each coordinator's `backgroundError` event).
 */
export async function stepDown(): Promise<void> {
  await Promise.allSettled([...liveCoordinators].map((coordinator) => coordinator.close()));
}

/** Options of {@link installStepDown}. */
export interface StepDownOptions {
  /** Signals to handle. Default `["SIGTERM", "SIGINT"]`. */
  readonly signals?: readonly NodeJS.Signals[];
  /** Longest wait for step-down before the process is let go anyway, in ms. Default 10000. */
  readonly timeoutMs?: number;
}

/**
 * Opt-in: on SIGTERM/SIGINT, run {@link stepDown} and then let the signal take its normal
 * course (the process exits as it would have). Returns a function that uninstalls the handler.
 *
 * @example
 * installStepDown(); // deploys no longer wait a TTL for a new leader
 */
export function installStepDown(options: StepDownOptions = {}): () => void {
  const signals = options.signals ?? (["SIGTERM", "SIGINT"] as const);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const handler = (signal: NodeJS.Signals) => {
    uninstall();
    const timer = setTimeout(() => process.kill(process.pid, signal), timeoutMs);
    void stepDown().finally(() => {
      clearTimeout(timer);
      process.kill(process.pid, signal);
    });
  };
  const uninstall = () => {
    for (const s of signals) process.off(s, handler);
  };
  for (const s of signals) process.on(s, handler);
  return uninstall;
}
