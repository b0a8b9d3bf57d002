import { rmSync } from "node:fs";
import { type BackendKind, isServerKind, type ServerKind } from "./backend-kind.js";
import { selectedBackends } from "./backend-selection.js";
import type { BatonServers } from "./baton-servers.js";
import { addExitCleanup } from "./exit-cleanup.js";
import { startLocalServers } from "./local-provider.js";
import type { ServerGroup } from "./server-group.js";
import { type ServerProviderName, selectedProvider } from "./server-provider.js";
import { ServerStartError } from "./server-start-error.js";
import { type ModuleImporter, startContainerServers } from "./testcontainers-provider.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { createWorkDir, keepLogsRequested, pruneServerData, removeWorkDir } from "./work-dir.js";

/** Options for {@link startServers}. */
export interface StartServersOptions {
  /** Backends to start servers for (default: `BATON_BACKENDS`, i.e. all). */
  readonly backends?: readonly BackendKind[];
  /** Where servers come from (default: `BATON_SERVER_PROVIDER`, i.e. `local`). */
  readonly provider?: ServerProviderName;
  /** Environment for selection and binary lookups; `process.env` by default. */
  readonly env?: NodeJS.ProcessEnv;
  /** Time allowed for each server group to become ready. */
  readonly timeoutMs?: number;
  /** Time between a polite stop signal and SIGKILL. */
  readonly graceMs?: number;
  /** Importer for the optional `testcontainers` package; tests pass a fake. */
  readonly importModule?: ModuleImporter;
  /**
   * More PostgreSQL server settings (`name=value`, as for `postgres -c`), e.g. a larger
   * `max_locks_per_transaction`. Local servers only.
   */
  readonly postgresSettings?: readonly string[];
}

/** Options for {@link StartedServers.stop}. */
export interface StopServersOptions {
  /**
   * Keep the temp dir with the servers' logs and configs, dropping their
   * data dirs. Pass true when tests failed. (With `BATON_KEEP_LOGS=1` the
   * whole dir, data included, is always kept.)
   */
  readonly keepLogs?: boolean;
}

/** What {@link StartedServers.stop} did. */
export interface StopServersReport {
  /** The temp dir that was kept, if any. */
  readonly keptWorkDir: string | undefined;
}

/** Servers started by {@link startServers}. */
export interface StartedServers {
  /** URLs (and unavailable backends) to hand to tests. */
  readonly servers: BatonServers;
  /** Process handles for fault injection, by kind (local provider only). */
  readonly groups: Readonly<Partial<Record<ServerKind, ServerGroup>>>;
  /** The temp dir holding data and logs (local provider only). */
  readonly workDir: string | undefined;
  /** Stops every server by PID and removes or keeps the temp dir. Idempotent. */
  stop(options?: StopServersOptions): Promise<StopServersReport>;
}

/**
 * On an unexpected exit: remove the dir after a clean exit, else keep its
 * logs (and, with `BATON_KEEP_LOGS`, its data).
 */
function keepDirOnExit(dir: string, env: NodeJS.ProcessEnv): () => void {
  return addExitCleanup("files", (exitCode) => {
    if (keepLogsRequested(env)) {
      process.stderr.write(`[baton harness] server data and logs kept in ${dir}\n`);
    } else if (exitCode === 0) {
      rmSync(dir, { recursive: true, force: true });
    } else {
      pruneServerData(dir);
      process.stderr.write(`[baton harness] server logs kept in ${dir}\n`);
    }
  });
}

async function startLocal(
  kinds: readonly ServerKind[],
  base: Pick<BatonServers, "selected" | "provider">,
  options: StartServersOptions,
  env: NodeJS.ProcessEnv,
): Promise<StartedServers> {
  const workDir = await createWorkDir();
  const unregister = keepDirOnExit(workDir, env);
  let set: Awaited<ReturnType<typeof startLocalServers>>;
  try {
    set = await startLocalServers(kinds, {
      dir: workDir,
      env,
      timeoutMs: options.timeoutMs ?? startTimeoutMs(env),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
      ...(options.postgresSettings === undefined
        ? {}
        : { postgresSettings: options.postgresSettings }),
    });
  } catch (error) {
    unregister();
    const message = error instanceof Error ? error.message : String(error);
    const logFiles = error instanceof ServerStartError ? error.logFiles : [];
    throw new ServerStartError(
      `${message}\n[baton harness] server data and logs kept in ${workDir}`,
      logFiles,
      {
        cause: error,
      },
    );
  }
  const urls: Partial<Record<ServerKind, string>> = {};
  for (const [kind, group] of Object.entries(set.groups) as [ServerKind, ServerGroup][]) {
    urls[kind] = group.url;
  }
  let stopping: Promise<StopServersReport> | undefined;
  return {
    servers: { ...base, ...urls, unavailable: set.unavailable },
    groups: set.groups,
    workDir,
    stop(stopOptions = {}) {
      stopping ??= (async () => {
        try {
          await Promise.all(Object.values(set.groups).map((group) => group.stop()));
        } finally {
          unregister();
        }
        if (keepLogsRequested(env)) {
          return { keptWorkDir: workDir };
        }
        if (stopOptions.keepLogs === true) {
          pruneServerData(workDir);
          return { keptWorkDir: workDir };
        }
        await removeWorkDir(workDir);
        return { keptWorkDir: undefined };
      })();
      return stopping;
    },
  };
}

/**
 * Starts the servers for the selected backends, in parallel, and waits
 * until all are ready.
 *
 * With the local provider every server runs from local binaries on free
 * 127.0.0.1 ports in a temp dir under `os.tmpdir()`; backends whose binaries
 * are missing are listed in `servers.unavailable` rather than failing. With
 * `testcontainers`, the optional package is imported only now.
 *
 * @throws Error for an unknown backend or provider name
 * @throws ServerStartError when a server fails to start (the temp dir with
 *   its logs is kept and named in the message)
 */
export async function startServers(options: StartServersOptions = {}): Promise<StartedServers> {
  const env = options.env ?? process.env;
  const selected = options.backends ? [...options.backends] : selectedBackends(env);
  const provider = options.provider ?? selectedProvider(env);
  const kinds = selected.filter(isServerKind);
  const base = { selected, provider };
  if (kinds.length === 0) {
    return {
      servers: { ...base, unavailable: {} },
      groups: {},
      workDir: undefined,
      stop: async () => ({ keptWorkDir: undefined }),
    };
  }
  if (provider === "local") {
    return startLocal(kinds, base, options, env);
  }
  const containers = await startContainerServers(kinds, {
    timeoutMs: options.timeoutMs ?? startTimeoutMs(env),
    ...(options.importModule === undefined ? {} : { importModule: options.importModule }),
  });
  let stopping: Promise<StopServersReport> | undefined;
  return {
    servers: { ...base, ...containers.urls, unavailable: {} },
    groups: {},
    workDir: undefined,
    stop() {
      stopping ??= containers.stop().then(() => ({ keptWorkDir: undefined }));
      return stopping;
    },
  };
}
