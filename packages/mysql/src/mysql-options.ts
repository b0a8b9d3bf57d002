import { type BackendUrl, ConfigError, checkOptions, parseBackendUrl } from "@baton/core";
import {
  type MysqlConnectionConfig,
  type MysqlPoolLike,
  poolConnectionConfig,
} from "./mysql-shapes.js";

/** Default of {@link MysqlBackendOptions.mode}. */
export const DEFAULT_MODE = "named-lock";

/** Default of {@link MysqlBackendOptions.tablePrefix}. */
export const DEFAULT_TABLE_PREFIX = "baton_";

/** Default of {@link MysqlBackendOptions.namespace}. */
export const DEFAULT_NAMESPACE = "baton";

/** Default of {@link MysqlBackendOptions.migrate}. */
export const DEFAULT_MIGRATE = true;

/** Default port of a `mysql://` or `mariadb://` URL without one. */
export const DEFAULT_PORT = 3306;

/**
 * Default of `connectTimeout` (ms) when neither the URL nor the settings give one: below core's
 * 5 s bound on opening a session, so a server that never answers fails with an error naming it.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 4_000;

/** How locks are kept: see {@link MysqlBackendOptions.mode}. */
export type MysqlLockMode = "named-lock" | "row-lease";

const MODES: readonly MysqlLockMode[] = ["named-lock", "row-lease"];

/** The URL schemes this package serves. */
export const MYSQL_SCHEMES = ["mysql", "mariadb"] as const;

/** Options of {@link MysqlBackend}. Give exactly one of `url`, `pool` and `config`. */
export interface MysqlBackendOptions {
  /**
   * `mysql://user:password@host:port/database` (also `mariadb://`; port 3306 by default; the
   * database is required: Baton's tables live there). Query parameters: `mode`, `namespace`,
   * `tablePrefix`, `connectTimeout` (ms, default {@link DEFAULT_CONNECT_TIMEOUT_MS}), `ssl`
   * (`true`: TLS with the server's certificate checked; `no-verify`: TLS, not checked; `false`:
   * none, the default) and `socketPath` for a unix socket
   * (`mysql://app@localhost/billing?socketPath=/run/mysqld/mysqld.sock`).
   */
  readonly url?: string;
  /**
   * A `mysql2` pool (callback or `mysql2/promise` API). Baton reads the settings its
   * connections are made with to open connections of its own, and runs {@link migrate} on it;
   * it never ends a pool it was given.
   */
  readonly pool?: MysqlPoolLike;
  /** `mysql2` connection settings (its `ConnectionOptions`) for Baton's own connections. */
  readonly config?: MysqlConnectionConfig;
  /**
   * How locks are kept (default {@link DEFAULT_MODE}; URL parameter `mode`):
   *
   * - `"named-lock"`: the server's named locks (`GET_LOCK`) on one dedicated connection per
   *   Baton session, made into a lease by the connection's idle limit. Needs a connection of
   *   its own to one server: a Galera node or a proxy in between is refused.
   * - `"row-lease"`: row leases. One row per session whose expiry, on the server's clock, one
   *   statement per interval renews, and one row per held lock; no connection is kept, so it
   *   works through poolers and proxies (ProxySQL) and on Galera. Waits poll (with backoff,
   *   at most every 250 ms, and within 20 ms again once a waiter saw the lock change hands).
   */
  readonly mode?: MysqlLockMode;
  /**
   * Prefix of Baton's table names (`baton_leases`, ...), in the connection's database: letters,
   * digits and `_`, at most 32. Default {@link DEFAULT_TABLE_PREFIX}.
   */
  readonly tablePrefix?: string;
  /**
   * Namespace of every lock name, so two applications sharing a server can use the same names
   * without meeting: lower-case letters, digits, `_`, `.` and `-`, at most 20 (it is part of
   * every `GET_LOCK` name, which the server limits to 64 characters). Default
   * {@link DEFAULT_NAMESPACE}.
   */
  readonly namespace?: string;
  /**
   * Create the tables on first use when missing (default {@link DEFAULT_MIGRATE}). With
   * `false`, run {@link migrate} once with a user that may create tables instead.
   */
  readonly migrate?: boolean;
}

/** Checked, complete settings of a backend. */
export interface ResolvedMysqlOptions {
  /** Connection settings for Baton's own connections. */
  readonly connection: MysqlConnectionConfig;
  /** The user's pool, when given (used for migrations only). */
  readonly pool: MysqlPoolLike | undefined;
  readonly mode: MysqlLockMode;
  readonly tablePrefix: string;
  readonly namespace: string;
  readonly migrate: boolean;
}

const OPTION_KEYS = new Set([
  "url",
  "pool",
  "config",
  "mode",
  "tablePrefix",
  "namespace",
  "migrate",
]);
const URL_PARAMS = new Set([
  "mode",
  "namespace",
  "tablePrefix",
  "connectTimeout",
  "ssl",
  "socketPath",
]);

const TABLE_PREFIX = /^[A-Za-z0-9_]{0,32}$/;
const NAMESPACE = /^[a-z0-9_.-]{1,20}$/;

/**
 * The settings of a pool's connections that Baton's own connections take (a pool's resolved
 * settings also hold the pool itself and derived flags, which a new connection must not get).
 */
const POOL_SETTINGS = [
  "host",
  "port",
  "localAddress",
  "socketPath",
  "user",
  "password",
  "password2",
  "password3",
  "passwordSha1",
  "database",
  "connectTimeout",
  "ssl",
  "insecureAuth",
  "enableKeepAlive",
  "keepAliveInitialDelay",
  "authPlugins",
  "enableCleartextPlugin",
  "compress",
  "connectAttributes",
  "stream",
] as const;

/** Checks options before any I/O; throws `ConfigError` naming the field. */
export function resolveMysqlOptions(options: MysqlBackendOptions): ResolvedMysqlOptions {
  // Absent options are refused like any other non-object.
  checkOptions(options ?? null, "options", [...OPTION_KEYS]);
  const given = ["url", "pool", "config"].filter(
    (k) => (options as Record<string, unknown>)[k] !== undefined,
  );
  if (given.length !== 1) {
    throw new ConfigError(
      "options",
      `give exactly one of url, pool and config (got ${given.length === 0 ? "none" : given.join(", ")})`,
    );
  }
  let connection: MysqlConnectionConfig;
  let mode = options.mode;
  let tablePrefix = options.tablePrefix;
  let namespace = options.namespace;
  if (options.url !== undefined) {
    const fromUrl = connectionFromUrl(parseBackendUrl(options.url));
    connection = fromUrl.connection;
    mode ??= fromUrl.mode;
    tablePrefix ??= fromUrl.tablePrefix;
    namespace ??= fromUrl.namespace;
  } else if (options.pool !== undefined) {
    const settings =
      typeof options.pool === "object" && options.pool !== null
        ? poolConnectionConfig(options.pool)
        : undefined;
    if (settings === undefined) {
      throw new ConfigError(
        "pool",
        "must be a mysql2 pool (mysql2's or mysql2/promise's createPool)",
      );
    }
    const picked: Record<string, unknown> = {};
    for (const key of POOL_SETTINGS) {
      if (settings[key] !== undefined && settings[key] !== null) picked[key] = settings[key];
    }
    connection = picked as MysqlConnectionConfig;
  } else {
    if (typeof options.config !== "object" || options.config === null) {
      throw new ConfigError("config", "must be a mysql2 ConnectionOptions object");
    }
    connection = { ...options.config };
  }
  const field = options.url !== undefined ? "url" : options.pool !== undefined ? "pool" : "config";
  if (typeof connection.database !== "string" || connection.database === "") {
    throw new ConfigError(
      field,
      "names no database: Baton's tables live in a database of the server; give one (mysql://host/mydb, or database in the settings)",
    );
  }
  if (mode !== undefined && !MODES.includes(mode)) {
    throw new ConfigError(
      "mode",
      `must be one of ${MODES.join(", ")}, got ${JSON.stringify(mode)}`,
    );
  }
  tablePrefix ??= DEFAULT_TABLE_PREFIX;
  if (typeof tablePrefix !== "string" || !TABLE_PREFIX.test(tablePrefix)) {
    throw new ConfigError(
      "tablePrefix",
      `must be letters, digits and "_", at most 32, got ${JSON.stringify(tablePrefix)}`,
    );
  }
  namespace ??= DEFAULT_NAMESPACE;
  if (typeof namespace !== "string" || !NAMESPACE.test(namespace)) {
    throw new ConfigError(
      "namespace",
      `must be 1 to 20 lower-case letters, digits, "_", "." or "-" (it is part of every GET_LOCK name, which the server limits to 64 characters), got ${JSON.stringify(namespace)}`,
    );
  }
  if (options.migrate !== undefined && typeof options.migrate !== "boolean") {
    throw new ConfigError("migrate", `must be a boolean, got ${typeof options.migrate}`);
  }
  return {
    connection: {
      ...connection,
      connectTimeout: connection.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT_MS,
    },
    pool: options.pool,
    mode: mode ?? DEFAULT_MODE,
    tablePrefix,
    namespace,
    migrate: options.migrate ?? DEFAULT_MIGRATE,
  };
}

/**
 * The options of a parsed `mysql://` or `mariadb://` URL (see {@link MysqlBackendOptions.url}):
 * `config` with its connection settings, and `mode`, `namespace` and `tablePrefix` when it
 * gives them. Checks them as the backend does, without any I/O; throws `ConfigError` on
 * anything unknown or malformed.
 */
export function mysqlOptionsFromUrl(url: BackendUrl): MysqlBackendOptions {
  const fromUrl = connectionFromUrl(url);
  const options: MysqlBackendOptions = {
    config: fromUrl.connection,
    ...(fromUrl.mode === undefined ? {} : { mode: fromUrl.mode }),
    ...(fromUrl.namespace === undefined ? {} : { namespace: fromUrl.namespace }),
    ...(fromUrl.tablePrefix === undefined ? {} : { tablePrefix: fromUrl.tablePrefix }),
  };
  resolveMysqlOptions(options);
  return options;
}

/** `T` with its members writable. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** `mysql2` settings from a parsed `mysql://` or `mariadb://` URL. */
export function connectionFromUrl(url: BackendUrl): {
  connection: MysqlConnectionConfig;
  mode: MysqlLockMode | undefined;
  namespace: string | undefined;
  tablePrefix: string | undefined;
} {
  if (!(MYSQL_SCHEMES as readonly string[]).includes(url.scheme)) {
    throw new ConfigError("url", `must start with mysql:// or mariadb://, got "${url.scheme}:"`);
  }
  if (url.hosts.length > 1) {
    throw new ConfigError(
      "url",
      "names more than one host; Baton's MySQL locks live on one server (give its address; for a Galera cluster, one node or a proxy in front of it, with ?mode=row-lease)",
    );
  }
  for (const key of url.searchParams.keys()) {
    if (!URL_PARAMS.has(key)) {
      throw new ConfigError("url", `unknown parameter "${key}"; use ${[...URL_PARAMS].join(", ")}`);
    }
  }
  let database: string;
  try {
    database = decodeURIComponent(url.pathname.replace(/^\/+/, ""));
  } catch {
    throw new ConfigError("url", "has a database name that is not well percent-encoded");
  }
  if (database.includes("/")) {
    throw new ConfigError("url", `has a bad database name "${database}"`);
  }
  if (database === "") {
    throw new ConfigError(
      "url",
      "names no database: Baton's tables live in a database of the server; give one (mysql://host/mydb)",
    );
  }
  const params = url.searchParams;
  const host = url.hosts[0];
  const socketPath = params.get("socketPath");
  if (socketPath !== null && !socketPath.startsWith("/")) {
    throw new ConfigError(
      "url",
      `the parameter "socketPath" must be an absolute path (such as /run/mysqld/mysqld.sock), got "${socketPath}"`,
    );
  }
  const connection: Mutable<MysqlConnectionConfig> = {
    ...(socketPath === null
      ? { host: host?.host ?? "localhost", port: host?.port ?? DEFAULT_PORT }
      : { socketPath }),
    ...(url.username === "" ? {} : { user: url.username }),
    ...(url.password === "" ? {} : { password: url.password }),
    database,
  };
  const timeout = params.get("connectTimeout");
  if (timeout !== null) {
    if (!/^\d{1,9}$/.test(timeout) || Number(timeout) < 1) {
      throw new ConfigError(
        "url",
        `the parameter "connectTimeout" must be a whole number of milliseconds, at least 1, got "${timeout}"`,
      );
    }
    connection.connectTimeout = Number(timeout);
  }
  const ssl = params.get("ssl");
  if (ssl !== null) {
    switch (ssl) {
      case "true":
        connection.ssl = {};
        break;
      case "no-verify":
        connection.ssl = { rejectUnauthorized: false };
        break;
      case "false":
        break;
      default:
        throw new ConfigError(
          "url",
          `the parameter "ssl" must be true, no-verify or false, got "${ssl}"`,
        );
    }
  }
  return {
    connection,
    mode: modeParam(params.get("mode")),
    namespace: params.get("namespace") ?? undefined,
    tablePrefix: params.get("tablePrefix") ?? undefined,
  };
}

/** The `mode` URL parameter, checked. */
function modeParam(text: string | null): MysqlLockMode | undefined {
  if (text === null) return undefined;
  if (!(MODES as readonly string[]).includes(text)) {
    throw new ConfigError(
      "url",
      `the parameter "mode" must be one of ${MODES.join(", ")}, got "${text}"`,
    );
  }
  return text as MysqlLockMode;
}
