import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, join } from "node:path";
import type { ServerKind } from "./backend-kind.js";
import { findOnPath, isExecutable } from "./find-on-path.js";

/** The command that installs every server binary the harness needs. */
export const INSTALL_HINT = "sudo bash scripts/install-servers.sh";

/**
 * Environment variables that override where the harness looks for server
 * binaries (useful for unusual installs, and for simulating a missing one).
 */
export const BINARY_ENV = {
  redisServer: "BATON_REDIS_SERVER",
  etcd: "BATON_ETCD",
  java: "BATON_JAVA",
  zookeeperJar: "BATON_ZOOKEEPER_JAR",
  slf4jJar: "BATON_SLF4J_JAR",
  postgresBinDir: "BATON_PG_BIN_DIR",
  pgbouncer: "BATON_PGBOUNCER",
  dynalite: "BATON_DYNALITE",
  azuriteBlob: "BATON_AZURITE_BLOB",
  mariadbd: "BATON_MARIADBD",
  mariadbInstallDb: "BATON_MARIADB_INSTALL_DB",
} as const;

/** Result of looking for a server's binaries: what was found, or why not. */
export type BinaryLookup<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: string };

/** Binaries for a Redis node (also used for the Redlock nodes). */
export interface RedisBinaries {
  /** Path of `redis-server`. */
  readonly redisServer: string;
}

/** Binaries for an etcd member. */
export interface EtcdBinaries {
  /** Path of `etcd`. */
  readonly etcd: string;
}

/** What runs a ZooKeeper node with plain java. */
export interface ZookeeperBinaries {
  /** Path of `java`. */
  readonly java: string;
  /** The class path: the ZooKeeper jar plus an SLF4J binding when one exists. */
  readonly classpath: string;
}

/** PostgreSQL server binaries. */
export interface PostgresBinaries {
  /** The directory holding `postgres`, `initdb` and `pg_isready`. */
  readonly binDir: string;
  /** The user to run as (`postgres`) when the harness runs as root. */
  readonly runAsUser?: string;
}

/** MariaDB server binaries (MySQL's `mysqld` and `mysql_install_db` work too). */
export interface MariadbBinaries {
  /** Path of `mariadbd`. */
  readonly mariadbd: string;
  /** Path of `mariadb-install-db`, which creates a data directory. */
  readonly installDb: string;
}

function missing(what: string, envName: string, packages: string): { ok: false; reason: string } {
  return {
    ok: false,
    reason: `${what} not found (install ${packages}: ${INSTALL_HINT}; or point ${envName} at it)`,
  };
}

/** Looks for `redis-server` (`BATON_REDIS_SERVER` overrides). */
export function findRedisBinaries(
  env: NodeJS.ProcessEnv = process.env,
): BinaryLookup<RedisBinaries> {
  const wanted = env[BINARY_ENV.redisServer] || "redis-server";
  const redisServer = findOnPath(wanted, env);
  if (redisServer === undefined) {
    return missing(`redis-server (${wanted})`, BINARY_ENV.redisServer, "package redis-server");
  }
  return { ok: true, value: { redisServer } };
}

/** Looks for `etcd` (`BATON_ETCD` overrides). */
export function findEtcdBinaries(env: NodeJS.ProcessEnv = process.env): BinaryLookup<EtcdBinaries> {
  const wanted = env[BINARY_ENV.etcd] || "etcd";
  const etcd = findOnPath(wanted, env);
  if (etcd === undefined) {
    return missing(`etcd (${wanted})`, BINARY_ENV.etcd, "packages etcd-server etcd-client");
  }
  return { ok: true, value: { etcd } };
}

function findSlf4jBinding(env: NodeJS.ProcessEnv): string | undefined {
  const explicit = env[BINARY_ENV.slf4jJar];
  if (explicit) {
    return existsSync(explicit) ? explicit : undefined;
  }
  const dir = "/usr/share/java";
  const preferred = join(dir, "slf4j-simple.jar");
  if (existsSync(preferred)) {
    return preferred;
  }
  try {
    const any = readdirSync(dir).find((file) => /^slf4j-simple.*\.jar$/.test(file));
    return any === undefined ? undefined : join(dir, any);
  } catch {
    return undefined;
  }
}

/**
 * Looks for java and the ZooKeeper jar (`BATON_JAVA`, `BATON_ZOOKEEPER_JAR`
 * and `BATON_SLF4J_JAR` override).
 */
export function findZookeeperBinaries(
  env: NodeJS.ProcessEnv = process.env,
): BinaryLookup<ZookeeperBinaries> {
  const wantedJava = env[BINARY_ENV.java] || "java";
  const java = findOnPath(wantedJava, env);
  if (java === undefined) {
    return missing(
      `java (${wantedJava})`,
      BINARY_ENV.java,
      "package zookeeper, which pulls in java",
    );
  }
  const jar = env[BINARY_ENV.zookeeperJar] || "/usr/share/java/zookeeper.jar";
  if (!existsSync(jar)) {
    return missing(`ZooKeeper jar ${jar}`, BINARY_ENV.zookeeperJar, "package zookeeper");
  }
  const binding = findSlf4jBinding(env);
  return {
    ok: true,
    value: { java, classpath: binding === undefined ? jar : `${jar}${delimiter}${binding}` },
  };
}

function userExists(user: string): boolean {
  try {
    return readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .some((line) => line.startsWith(`${user}:`));
  } catch {
    return false;
  }
}

function newestPostgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  let versions: string[];
  try {
    versions = readdirSync(root);
  } catch {
    return undefined;
  }
  const dirs = versions
    .filter((version) => /^\d+(\.\d+)?$/.test(version))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))
    .map((version) => join(root, version, "bin"));
  return dirs.find((dir) => isExecutable(join(dir, "postgres")));
}

/**
 * Looks for the PostgreSQL server binaries (`BATON_PG_BIN_DIR` overrides;
 * default: the newest `/usr/lib/postgresql/N/bin`). As root, also needs
 * the `postgres` user and `setpriv`, because PostgreSQL refuses root.
 */
export function findPostgresBinaries(
  env: NodeJS.ProcessEnv = process.env,
): BinaryLookup<PostgresBinaries> {
  const explicit = env[BINARY_ENV.postgresBinDir];
  const binDir = explicit || newestPostgresBinDir();
  const where = explicit ? explicit : "/usr/lib/postgresql/*/bin";
  if (binDir === undefined) {
    return missing(
      `PostgreSQL server (${where}/postgres)`,
      BINARY_ENV.postgresBinDir,
      "package postgresql",
    );
  }
  for (const program of ["postgres", "initdb", "pg_isready"]) {
    if (!isExecutable(join(binDir, program))) {
      return missing(`${join(binDir, program)}`, BINARY_ENV.postgresBinDir, "package postgresql");
    }
  }
  if (process.getuid?.() !== 0) {
    return { ok: true, value: { binDir } };
  }
  if (!userExists("postgres")) {
    return {
      ok: false,
      reason: `PostgreSQL refuses to run as root and there is no "postgres" user (install package postgresql: ${INSTALL_HINT})`,
    };
  }
  if (findOnPath("setpriv", env) === undefined) {
    return {
      ok: false,
      reason: "setpriv (util-linux) is needed to run PostgreSQL as postgres from root",
    };
  }
  return { ok: true, value: { binDir, runAsUser: "postgres" } };
}

/**
 * Why a server kind cannot start here, or `undefined` when its binaries are
 * all present.
 *
 * @param kind - the server kind (`redlock` needs redis-server, like `redis`)
 */
export function missingBinaryReason(
  kind: ServerKind,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  switch (kind) {
    case "redis":
    case "redlock":
      return reasonOf(findRedisBinaries(env));
    case "etcd":
      return reasonOf(findEtcdBinaries(env));
    case "zookeeper":
      return reasonOf(findZookeeperBinaries(env));
    case "postgres":
      return reasonOf(findPostgresBinaries(env));
    case "postgres-lease":
      return reasonOf(findPostgresBinaries(env)) ?? reasonOf(findPgBouncer(env));
    case "dynamodb":
      return reasonOf(findDynalite(env));
    case "azure-blob":
      return reasonOf(findAzuriteBlob(env));
    case "mysql":
    case "mysql-lease":
      return reasonOf(findMariadbBinaries(env));
  }
}

function reasonOf(lookup: BinaryLookup<unknown>): string | undefined {
  return lookup.ok ? undefined : lookup.reason;
}

/** Looks for `pgbouncer` (`BATON_PGBOUNCER` overrides; default: PATH, then /usr/sbin). */
export function findPgBouncer(env: NodeJS.ProcessEnv = process.env): BinaryLookup<string> {
  const explicit = env[BINARY_ENV.pgbouncer];
  const found = explicit
    ? isExecutable(explicit)
      ? explicit
      : undefined
    : (findOnPath("pgbouncer", env) ??
      (isExecutable("/usr/sbin/pgbouncer") ? "/usr/sbin/pgbouncer" : undefined));
  return found === undefined
    ? missing("pgbouncer", BINARY_ENV.pgbouncer, "package pgbouncer")
    : { ok: true, value: found };
}

/** The path of `pgbouncer`, or throws with what to install. */
export function requirePgBouncer(env: NodeJS.ProcessEnv = process.env): string {
  const lookup = findPgBouncer(env);
  if (!lookup.ok) throw new Error(lookup.reason);
  return lookup.value;
}

/**
 * Looks for dynalite's command-line script (`BATON_DYNALITE` overrides; default: the copy
 * installed with this package, a devDependency of @baton/conformance). It runs under the
 * current Node.js.
 */
export function findDynalite(env: NodeJS.ProcessEnv = process.env): BinaryLookup<string> {
  const explicit = env[BINARY_ENV.dynalite];
  let found: string | undefined;
  if (explicit) {
    found = existsSync(explicit) ? explicit : undefined;
  } else {
    try {
      found = createRequire(import.meta.url).resolve("dynalite/cli.js");
    } catch {
      found = undefined;
    }
  }
  return found === undefined
    ? {
        ok: false,
        reason: `dynalite not found (run npm ci: it is a devDependency of @baton/conformance; or point ${BINARY_ENV.dynalite} at its cli.js)`,
      }
    : { ok: true, value: found };
}

/**
 * Looks for Azurite's Blob service script (`BATON_AZURITE_BLOB` overrides; default: the copy
 * installed with this package, a devDependency of @baton/conformance). It runs under the
 * current Node.js.
 */
export function findAzuriteBlob(env: NodeJS.ProcessEnv = process.env): BinaryLookup<string> {
  const explicit = env[BINARY_ENV.azuriteBlob];
  let found: string | undefined;
  if (explicit) {
    found = existsSync(explicit) ? explicit : undefined;
  } else {
    try {
      found = createRequire(import.meta.url).resolve("azurite/dist/src/blob/main.js");
    } catch {
      found = undefined;
    }
  }
  return found === undefined
    ? {
        ok: false,
        reason: `Azurite not found (run npm ci: it is a devDependency of @baton/conformance; or point ${BINARY_ENV.azuriteBlob} at its dist/src/blob/main.js)`,
      }
    : { ok: true, value: found };
}

/** The first of `names` found on PATH (or in /usr/sbin, /sbin), or the explicit one. */
function findFirst(explicit: string | undefined, names: readonly string[], env: NodeJS.ProcessEnv) {
  if (explicit) return findOnPath(explicit, env);
  for (const name of names) {
    const found = findOnPath(name, env);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Looks for the MariaDB server and `mariadb-install-db` (`BATON_MARIADBD` and
 * `BATON_MARIADB_INSTALL_DB` override; default: PATH, /usr/sbin and /sbin, under the names
 * `mariadbd` or `mysqld`, and `mariadb-install-db` or `mysql_install_db`).
 */
export function findMariadbBinaries(
  env: NodeJS.ProcessEnv = process.env,
): BinaryLookup<MariadbBinaries> {
  const mariadbd = findFirst(env[BINARY_ENV.mariadbd], ["mariadbd", "mysqld"], env);
  if (mariadbd === undefined) {
    return missing("MariaDB server (mariadbd)", BINARY_ENV.mariadbd, "package mariadb-server");
  }
  const installDb = findFirst(
    env[BINARY_ENV.mariadbInstallDb],
    ["mariadb-install-db", "mysql_install_db"],
    env,
  );
  if (installDb === undefined) {
    return missing("mariadb-install-db", BINARY_ENV.mariadbInstallDb, "package mariadb-server");
  }
  return { ok: true, value: { mariadbd, installDb } };
}
