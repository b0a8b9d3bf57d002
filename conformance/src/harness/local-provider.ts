import { startAzurite } from "./azurite-server.js";
import type { ServerKind } from "./backend-kind.js";
import { startDynalite } from "./dynalite-server.js";
import { startEtcdCluster } from "./etcd-cluster.js";
import type { LocalStartOptions } from "./local-start-options.js";
import { groupForKind, mariadbPort, mariadbUrls, startMariadb } from "./mariadb-server.js";
import { startPostgresBehindPgBouncer } from "./pgbouncer-server.js";
import { startPostgres } from "./postgres-server.js";
import { startRedisNodes } from "./redis-server.js";
import { missingBinaryReason } from "./server-binaries.js";
import type { ServerGroup } from "./server-group.js";
import { ServerStartError } from "./server-start-error.js";
import { makeSubdir } from "./work-dir.js";
import { startZookeeperEnsemble } from "./zookeeper-ensemble.js";

/** Servers started from local binaries. */
export interface LocalServerSet {
  /** Running groups, by kind. */
  readonly groups: Partial<Record<ServerKind, ServerGroup>>;
  /** Kinds that were requested but whose binaries are missing, with the reason. */
  readonly unavailable: Partial<Record<ServerKind, string>>;
}

/**
 * Starts one kind of server from local binaries with its default shape:
 * `redis` one node, `redlock` five nodes, `etcd` three members,
 * `zookeeper` three nodes, `postgres` one server, `mysql` and `mysql-lease` one MariaDB
 * server each (see {@link startLocalServers} for the one they share).
 *
 * @param kind - which server
 * @param options - `dir` is the group's own directory
 */
export function startLocalServer(
  kind: ServerKind,
  options: LocalStartOptions,
): Promise<ServerGroup> {
  switch (kind) {
    case "redis":
    case "redlock":
      return startRedisNodes({ ...options, kind });
    case "etcd":
      return startEtcdCluster(options);
    case "zookeeper":
      return startZookeeperEnsemble(options);
    case "postgres":
      return startPostgres(options);
    case "postgres-lease":
      return startPostgresBehindPgBouncer(options);
    case "dynamodb":
      return startDynalite(options);
    case "azure-blob":
      return startAzurite(options);
    case "mysql":
    case "mysql-lease":
      return startMariadb({ ...options, kind });
  }
}

/**
 * Starts the requested kinds in parallel, each in its own subdirectory of
 * `options.dir`. Kinds whose binaries are missing are reported in
 * `unavailable` instead of failing. `mysql` and `mysql-lease` (the two modes of
 * `@baton/mysql`) share one MariaDB server: its group is started once, under `mysql`, and
 * `mysql-lease` gets a view of it with its own URL.
 *
 * @throws ServerStartError when any server fails to start; the servers that
 *   did start are stopped first, and the message holds every failure
 */
export async function startLocalServers(
  kinds: readonly ServerKind[],
  options: LocalStartOptions,
): Promise<LocalServerSet> {
  const unavailable: Partial<Record<ServerKind, string>> = {};
  const startable: ServerKind[] = [];
  for (const kind of kinds) {
    const reason = missingBinaryReason(kind, options.env);
    if (reason === undefined) {
      startable.push(kind);
    } else {
      unavailable[kind] = reason;
    }
  }
  const shared = startable.includes("mysql") && startable.includes("mysql-lease");
  const starting = shared ? startable.filter((kind) => kind !== "mysql-lease") : startable;
  const results = await Promise.allSettled(
    starting.map(async (kind) =>
      startLocalServer(kind, { ...options, dir: await makeSubdir(options.dir, kind) }),
    ),
  );
  const groups: Partial<Record<ServerKind, ServerGroup>> = {};
  const failures: { kind: ServerKind; error: unknown }[] = [];
  for (const [index, result] of results.entries()) {
    const kind = starting[index] as ServerKind;
    if (result.status === "fulfilled") {
      groups[kind] = result.value;
    } else {
      failures.push({ kind, error: result.reason });
    }
  }
  if (shared && groups.mysql !== undefined) {
    const mysql = groups.mysql;
    groups["mysql-lease"] = groupForKind(
      mysql,
      "mysql-lease",
      mariadbUrls(mariadbPort(mysql))["mysql-lease"],
    );
  }
  if (failures.length > 0) {
    await Promise.allSettled(Object.values(groups).map((group) => group.stop()));
    const message = failures
      .map(
        ({ kind, error }) => `[${kind}] ${error instanceof Error ? error.message : String(error)}`,
      )
      .join("\n\n");
    const logFiles = failures.flatMap(({ error }) =>
      error instanceof ServerStartError ? [...error.logFiles] : [],
    );
    throw new ServerStartError(
      `could not start ${failures.map((f) => f.kind).join(", ")}:\n${message}`,
      logFiles,
      {
        cause: failures[0]?.error,
      },
    );
  }
  return { groups, unavailable };
}
