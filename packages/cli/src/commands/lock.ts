import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  type Lock,
  LockHeldError,
  LockLostError,
  LockTimeoutError,
} from "@baton/core";
import { backendFrom, msOption, nameFrom, parse } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import { exitCodeOf, onSignals, runChild } from "../run-child.js";
import { UsageError } from "../usage-error.js";

export const LOCK_USAGE = `usage: baton lock NAME [--backend URL] [--ttl MS] [--wait MS | --no-wait] [--grace MS] [--value TEXT] -- CMD [ARGS...]

Runs CMD while holding the lock NAME. CMD gets BATON_LOCK_NAME, BATON_FENCING_TOKEN and
BATON_BACKEND. If the lock is lost, CMD gets SIGTERM, then SIGKILL after --grace (default 5000).
Signals sent to baton are forwarded to CMD; the lock is released when CMD ends.

  --backend URL   store URL (or BATON_BACKEND), e.g. redis://127.0.0.1:6379, etcd://h1:2379,h2:2379
  --ttl MS        lease length (default 15000)
  --wait MS       wait up to MS for the lock (default 60000); --no-wait: try once
Exit codes: CMD's own when it ran; ${EXIT.held} held (--no-wait); ${EXIT.timeout} wait ran out;
${EXIT.lost} lock lost while CMD ran; ${EXIT.unavailable} store unreachable; ${EXIT.usage} bad usage; ${EXIT.cannotRun} CMD could not start.`;

/** `baton lock`. Resolves with the exit code. */
export async function lockCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals, command } = parse(argv, {
    backend: { type: "string" },
    ttl: { type: "string" },
    wait: { type: "string" },
    "no-wait": { type: "boolean" },
    grace: { type: "string" },
    value: { type: "string" },
  });
  if (values.help) {
    out(LOCK_USAGE);
    return 0;
  }
  const name = nameFrom(positionals, LOCK_USAGE);
  if (command.length === 0) throw new UsageError(`missing CMD after --\n${LOCK_USAGE}`);
  if (values.wait !== undefined && values["no-wait"])
    throw new UsageError("--wait and --no-wait exclude each other");
  const backend = backendFrom(values.backend, process.env);
  const ttlMs = msOption(values.ttl, "ttl", 15_000, 10);
  const waitMs = values["no-wait"] ? 0 : msOption(values.wait, "wait", 60_000, 0);
  const graceMs = msOption(values.grace, "grace", 5_000, 0);
  const value = typeof values.value === "string" ? values.value : undefined;

  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend, ttlMs });
  const cancel = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const stopWaiting = onSignals((signal) => {
    interrupted = signal;
    cancel.abort(new Error(`baton: ${signal} while waiting for "${name}"`));
  });
  let lock: Lock;
  try {
    lock = await coordinator.acquire(name, {
      waitMs,
      signal: cancel.signal,
      ...(value !== undefined ? { value } : {}),
    });
  } catch (error) {
    stopWaiting();
    await coordinator.close().catch(() => undefined);
    if (interrupted !== undefined) return exitCodeOf({ code: null, signal: interrupted });
    if (error instanceof LockHeldError) {
      err(`baton: lock "${name}" is held by someone else`);
      return EXIT.held;
    }
    if (error instanceof LockTimeoutError) {
      err(`baton: ${error.message}`);
      return EXIT.timeout;
    }
    if (error instanceof ConfigError) throw new UsageError(error.message);
    if (error instanceof BackendUnavailableError) {
      err(`baton: ${error.message}`);
      return EXIT.unavailable;
    }
    throw error;
  }
  stopWaiting();

  const child = runChild(command, {
    BATON_LOCK_NAME: name,
    BATON_FENCING_TOKEN: `${lock.token}`,
    BATON_BACKEND: backend,
  });
  const stopForwarding = onSignals((signal) => child.signal(signal));
  let lost: LockLostError | undefined;
  const onLost = () => {
    const reason: unknown = lock.signal.reason;
    if (reason instanceof LockLostError && reason.reason !== "released") {
      lost = reason;
      err(`baton: ${reason.message}; stopping the command`);
      void child.stop(graceMs);
    }
  };
  lock.signal.addEventListener("abort", onLost, { once: true });
  const exit = await child.exited;
  stopForwarding();
  lock.signal.removeEventListener("abort", onLost);
  await lock
    .release()
    .catch((error: unknown) => err(`baton: release failed: ${(error as Error).message}`));
  await coordinator.close().catch(() => undefined);
  if (exit.spawnError !== undefined) {
    err(`baton: cannot run ${command[0]}: ${exit.spawnError.message}`);
    return EXIT.cannotRun;
  }
  if (lost !== undefined) return EXIT.lost;
  return exitCodeOf(exit);
}
