/** @internal Every coordinator not yet closed, for step-down. */
export const liveCoordinators = new Set<{ close(): Promise<void> }>();

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
 * Opt-in: on SIGTERM/SIGINT, run {@link stepDown}. When nothing else in the process handles
 * the signal, Baton then lets it take its normal course (the process exits as it would have).
 * When the application has its own handler for it (`process.on("SIGTERM", ...)`, before or
 * after this call), that handler runs once, as Node delivers the signal, and the exit is the
 * application's to make: Baton does not send the signal again, which would run that handler a
 * second time. Such a handler should await {@link stepDown} before it exits, so the
 * hand-over finishes first. Returns a function that uninstalls the handler.
 *
 * @example
 * installStepDown(); // deploys no longer wait a TTL for a new leader
 */
export function installStepDown(options: StepDownOptions = {}): () => void {
  const signals = options.signals ?? (["SIGTERM", "SIGINT"] as const);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const handler = (signal: NodeJS.Signals) => {
    uninstall();
    // Someone else handles this signal: its default action (exit) is theirs to take, and
    // sending it again would run their handler twice.
    const handledElsewhere = process.listenerCount(signal) > 0;
    const exit = () => {
      if (!handledElsewhere) process.kill(process.pid, signal);
    };
    const timer = setTimeout(exit, timeoutMs);
    void stepDown().finally(() => {
      clearTimeout(timer);
      exit();
    });
  };
  const uninstall = () => {
    for (const s of signals) process.off(s, handler);
  };
  for (const s of signals) process.on(s, handler);
  return uninstall;
}
