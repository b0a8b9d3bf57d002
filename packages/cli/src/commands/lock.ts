import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  type Fence,
  type Lock,
  LockHeldError,
  LockLostError,
  LockTimeoutError,
  MAX_PERMITS,
  PermitLimitError,
  parseBackendUrl,
  StaleTokenError,
} from "@baton/core";
import { backendFrom, msOption, nameFrom, parse, usageFromConfig } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import {
  acquireHold,
  describeHeld,
  type LockKind,
  limitUsage,
  lockKindFrom,
} from "../lock-kind.js";
import { cannotRun, exitCodeOf, onSignals, runChild } from "../run-child.js";
import { UsageError } from "../usage-error.js";

export const LOCK_USAGE = `usage: baton lock NAME [--permits N [--take K] | --read | --write] [--backend URL]
       [--ttl MS] [--wait MS | --no-wait] [--grace MS] [--value TEXT] [--fence URL
       [--fence-table T] [--fence-resource-column C] [--fence-token-column C]] -- CMD [ARGS...]

Runs CMD while holding the lock NAME; with --permits N, while holding a permit of the
semaphore NAME (N run at once); with --read or --write, while holding the read-write lock
NAME for reading (many at once, none beside a write) or for writing (one at a time).
The lock NAME is apart from the semaphore or read-write lock NAME; those two share their
names, so a name is a semaphore or a read-write lock, not both.
CMD gets BATON_LOCK_NAME, BATON_FENCING_TOKEN and BATON_BACKEND (no BATON_FENCING_TOKEN, and
a warning, on a backend whose grants carry no ordered token, such as redlock://: a fence
could not tell an old holder from a new one). If the lock is lost, CMD gets SIGTERM, then
SIGKILL after --grace. Signals sent to baton are forwarded to CMD. CMD runs in a process
group of its own: stopping and forwarded signals reach every process it started, whatever
it leaves running when it ends is stopped too (SIGTERM, SIGKILL after --grace), and if baton
itself dies, even by SIGKILL, the group is killed; the lock is released once all have ended.

  --permits N     hold the semaphore NAME of N permits (1 to ${MAX_PERMITS}) instead of a lock:
                  every run of NAME must give the same N. Each grant gets a new, greater token
  --take K        with --permits: hold K of the N permits (default 1)
  --read          hold the read-write lock NAME for reading: BATON_FENCING_TOKEN is the token
                  of its newest write (0 before the first). Waits behind a waiting --write
  --write         hold the read-write lock NAME for writing, with a new, greater token
  --backend URL   store URL (or BATON_BACKEND), e.g. redis://127.0.0.1:6379, etcd://h1:2379,h2:2379
  --ttl MS        lease length (default 15000)
  --wait MS       wait up to MS for the lock (default 60000)
  --no-wait       try once: exit ${EXIT.held} at once if someone else holds the lock (or
                  not enough permits are free)
  --grace MS      how long a CMD whose lock was lost has after SIGTERM before SIGKILL (default 5000)
  --value TEXT    published with the lock, shown by baton status (at most 4096 characters)
  --fence URL     correctness mode: before CMD starts, raise the fence in this PostgreSQL
                  database (postgres://user@host/db) to the new token, under NAME, so writes
                  of an older holder are rejected from then on. CMD's fenced writes use NAME
                  and BATON_FENCING_TOKEN. Needs a backend with ordered tokens: etcd,
                  zookeeper or postgres. With a plain lock or --write only
  --fence-table T            the fence table, table or schema.table (default baton.fence;
                             created when missing)
  --fence-resource-column C  its column of lock names (default resource)
  --fence-token-column C     its column of tokens (default token)
  -h, --help      show this text
Exit codes: CMD's own when it ran; ${EXIT.held} held (--no-wait); ${EXIT.timeout} wait ran out;
${EXIT.lost} lock lost while CMD ran, or the fence had seen a newer token; ${EXIT.unavailable} store or fence unreachable;
${EXIT.usage} bad usage, another N for NAME in the store, or --permits, --read or --write on a
backend without semaphores (redlock://); ${EXIT.cannotRun} CMD could not start.`;

/** The options `baton lock` takes (besides -h, --help), each documented in {@link LOCK_USAGE}. */
export const LOCK_OPTIONS = {
  backend: { type: "string" },
  ttl: { type: "string" },
  wait: { type: "string" },
  "no-wait": { type: "boolean" },
  grace: { type: "string" },
  value: { type: "string" },
  fence: { type: "string" },
  "fence-table": { type: "string" },
  "fence-resource-column": { type: "string" },
  "fence-token-column": { type: "string" },
  permits: { type: "string" },
  take: { type: "string" },
  read: { type: "boolean" },
  write: { type: "boolean" },
} as const;

/** The `--fence*` flag of each `pgFence` option, for messages. */
const FENCE_FLAGS: Record<string, string> = {
  table: "--fence-table",
  resourceColumn: "--fence-resource-column",
  tokenColumn: "--fence-token-column",
};

/** A fence that the command opened and closes. */
type OwnFence = Fence & { close(): Promise<void> };

/** The `--fence` options as a PostgreSQL fence, checked without I/O; undefined without `--fence`. */
async function fenceFrom(
  values: Record<string, unknown>,
  kind: LockKind,
): Promise<OwnFence | undefined> {
  const url = values.fence;
  const flags = ["fence-table", "fence-resource-column", "fence-token-column"];
  if (typeof url !== "string") {
    const stray = flags.find((flag) => values[flag] !== undefined);
    if (stray !== undefined) throw new UsageError(`--${stray} needs --fence URL`);
    return undefined;
  }
  if (kind.mode === "permit" || kind.mode === "read") {
    throw new UsageError(
      `--fence and ${kind.mode === "read" ? "--read" : "--permits"} exclude each other: the fence is raised to a new token of one holder at a time, which only a plain lock or --write takes`,
    );
  }
  let scheme: string;
  try {
    scheme = parseBackendUrl(url).scheme;
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`--fence: ${error.message}`);
    throw error;
  }
  if (scheme !== "postgres" && scheme !== "postgresql") {
    throw new UsageError(
      `--fence must be a PostgreSQL URL (postgres://user@host/db), got "${scheme}:"`,
    );
  }
  const { pgFence } = await import("@baton/postgres");
  const pick = (flag: string) => (typeof values[flag] === "string" ? values[flag] : undefined);
  const options = {
    ...(pick("fence-table") ? { table: pick("fence-table") } : {}),
    ...(pick("fence-resource-column") ? { resourceColumn: pick("fence-resource-column") } : {}),
    ...(pick("fence-token-column") ? { tokenColumn: pick("fence-token-column") } : {}),
  };
  try {
    return pgFence(url, options);
  } catch (error) {
    if (error instanceof ConfigError) {
      throw error.field === "url" ? new UsageError(`--fence: ${error.message}`) : fenceUsage(error);
    }
    throw error;
  }
}

/** A fence's `ConfigError` as a usage error naming the flag. */
function fenceUsage(error: ConfigError): UsageError {
  const flag = FENCE_FLAGS[error.field];
  return flag === undefined ? usageFromConfig(error) : new UsageError(`${flag}: ${error.message}`);
}

/** `baton lock`. Resolves with the exit code. */
export async function lockCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals, command } = parse(argv, LOCK_OPTIONS);
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
  const kind = lockKindFrom(values);

  const fence = await fenceFrom(values, kind);

  await loadAdapter(backend);
  let coordinator: ReturnType<typeof createCoordinator>;
  try {
    coordinator = createCoordinator({
      url: backend,
      ttlMs,
      ...(fence === undefined ? {} : { mode: "correctness" as const, fence }),
    });
  } catch (error) {
    await fence?.close();
    if (error instanceof ConfigError) throw usageFromConfig(error);
    throw error;
  }
  const cancel = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const stopWaiting = onSignals((signal) => {
    interrupted = signal;
    cancel.abort(new Error(`baton: ${signal} while waiting for "${name}"`));
  });
  let lock: Lock;
  try {
    lock = await acquireHold(coordinator, name, kind, {
      waitMs,
      signal: cancel.signal,
      ...(value !== undefined ? { value } : {}),
    });
  } catch (error) {
    stopWaiting();
    await coordinator.close().catch(() => undefined);
    await fence?.close().catch(() => undefined);
    if (interrupted !== undefined) return exitCodeOf({ code: null, signal: interrupted });
    if (error instanceof LockHeldError) {
      err(`baton: ${describeHeld(name, kind)}`);
      return EXIT.held;
    }
    if (error instanceof PermitLimitError) throw limitUsage(error, kind);
    if (error instanceof LockTimeoutError) {
      err(`baton: ${error.message}`);
      return EXIT.timeout;
    }
    if (error instanceof ConfigError) {
      throw fence === undefined ? usageFromConfig(error) : fenceUsage(error);
    }
    if (error instanceof StaleTokenError) {
      err(`baton: the fence rejected the new token of "${name}": ${error.message}`);
      return EXIT.lost;
    }
    if (error instanceof BackendUnavailableError) {
      err(`baton: ${error.message}`);
      return EXIT.unavailable;
    }
    throw error;
  }

  const env: Record<string, string> = { BATON_LOCK_NAME: name, BATON_BACKEND: backend };
  const store = await coordinator.backend();
  if (store.guarantees.fencing === "none") {
    // Not even one inherited from an outer run: CMD must not mistake it for this lock's.
    delete process.env.BATON_FENCING_TOKEN;
    err(
      `baton: warning: the ${store.kind} backend hands out no ordered fencing token, so CMD gets no BATON_FENCING_TOKEN; the lock avoids duplicate work but cannot fence writes`,
    );
  } else env.BATON_FENCING_TOKEN = `${lock.token}`;
  // Until CMD starts, a signal to baton means "do not start it"; from then on, it is CMD's.
  const before = interrupted;
  if (before !== undefined) {
    stopWaiting();
    await lock.release().catch(() => undefined);
    await coordinator.close().catch(() => undefined);
    await fence?.close().catch(() => undefined);
    return exitCodeOf({ code: null, signal: before });
  }
  const child = runChild(command, env, graceMs);
  const stopForwarding = onSignals((signal) => child.signal(signal));
  // Baton's handlers stay in place throughout (without one, a signal would end baton and
  // leave CMD running): one that came while CMD was starting is forwarded now.
  stopWaiting();
  const starting = interrupted;
  if (starting !== undefined) child.signal(starting);
  let lost: LockLostError | undefined;
  const onLost = () => {
    const reason: unknown = lock.signal.reason;
    if (reason instanceof LockLostError && reason.reason !== "released") {
      lost = reason;
      err(`baton: ${reason.message}; stopping the command`);
      void child.stop();
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
  await fence?.close().catch(() => undefined);
  if (exit.spawnError !== undefined) {
    err(`baton: ${cannotRun(command, exit.spawnError)}`);
    return EXIT.cannotRun;
  }
  if (lost !== undefined) return EXIT.lost;
  return exitCodeOf(exit);
}
