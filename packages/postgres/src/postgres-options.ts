import { type BackendUrl, ConfigError, checkOptions, parseBackendUrl } from "@baton/core";
import type { PgConnectionConfig, PgPoolLike } from "./pg-shapes.js";
import { quoteIdentifier } from "./sql-identifier.js";

/** Default of {@link PostgresBackendOptions.schema}. */
export const DEFAULT_SCHEMA = "baton";

/** Default of {@link PostgresBackendOptions.namespace}. */
export const DEFAULT_NAMESPACE = "baton";

/** Default of {@link PostgresBackendOptions.migrate}. */
export const DEFAULT_MIGRATE = true;

/** Default of {@link PostgresBackendOptions.locks}. */
export const DEFAULT_LOCKS = "advisory";

/** Default of {@link PostgresBackendOptions.poolSize}. */
export const DEFAULT_POOL_SIZE = 16;

/** The largest {@link PostgresBackendOptions.poolSize}. */
const MAX_POOL_SIZE = 1_000;

/** How locks are kept: see {@link PostgresBackendOptions.locks}. */
export type PostgresLockMode = "advisory" | "lease";

const LOCK_MODES: readonly PostgresLockMode[] = ["advisory", "lease"];

/** Options of {@link PostgresBackend}. Give exactly one of `url`, `pool` and `config`. */
export interface PostgresBackendOptions {
  /**
   * `postgres://user:password@host:port/database?schema=baton&namespace=baton` (also
   * `postgresql://`). Query parameters: `schema`, `namespace`, `locks`, `pool_size`, and the libpq ones
   * `application_name`, `sslmode` (`disable`, `allow`, `prefer`, `require`, `verify-ca`,
   * `verify-full`, `no-verify`; the package README says what each means with `pg`),
   * `connect_timeout` (seconds; default 4, below core's 5 s bound on opening a session, so
   * that a server that never answers fails with an error naming it), and `host` and `port`
   * for a unix socket
   * (`postgres://app@/billing?host=/var/run/postgresql&port=5433`).
   */
  readonly url?: string;
  /**
   * A `pg.Pool` (any {@link PgPoolLike}). Baton reads its connection settings (`pool.options`) to open its own
   * dedicated connections and uses the pool itself only to check or create the schema; it
   * never ends a pool it was given. It does not hold locks on the pool's connections: a
   * session-level advisory lock belongs to the connection that took it until that connection
   * unlocks it or ends, so a Baton session keeps its connection for its whole life, with
   * `idle_session_timeout` set to the TTL on it. Taken from the pool, each would be a slot the
   * application never gets back (one per coordinator and lock TTL, one per waiting acquire);
   * given back, it would hand Baton's locks and that timeout to the next borrower. The
   * package README counts the connections Baton opens.
   */
  readonly pool?: PgPoolLike;
  /** `pg` connection settings (a `pg.ClientConfig`) for the dedicated connections. */
  readonly config?: PgConnectionConfig;
  /** Schema of Baton's tables and token sequence. Default {@link DEFAULT_SCHEMA}. */
  readonly schema?: string;
  /**
   * Namespace mixed into the hash of every lock name, so two applications sharing a database
   * can use the same names without meeting. Default {@link DEFAULT_NAMESPACE}.
   */
  readonly namespace?: string;
  /**
   * Create the schema, tables and sequence on first use when missing (default
   * {@link DEFAULT_MIGRATE}). With `false`, run {@link migrate} once with a privileged role
   * instead.
   */
  readonly migrate?: boolean;
  /**
   * How locks are kept (default {@link DEFAULT_LOCKS}; URL parameter `locks`):
   *
   * - `"advisory"`: session-level advisory locks, one dedicated connection per Baton session,
   *   waits in PostgreSQL's own lock queue. Needs a connection of its own to the server: a
   *   pooler in transaction mode (PgBouncer's `pool_mode = transaction`) is detected at the
   *   first session and refused with a `ConfigError`.
   * - `"lease"`: row leases. One row per session whose expiry, on the server's clock, one
   *   statement per interval renews, and one row per held lock; every statement is a
   *   transaction of its own, so it works through a pooler in transaction mode. Waits poll
   *   (with backoff, at most every 250 ms, and within 20 ms again once a waiter saw the lock
   *   change hands) instead of queueing in the server; no `watch()`.
   */
  readonly locks?: PostgresLockMode;
  /**
   * Row-lease mode (`locks: "lease"`): the most connections the backend's statements run on at
   * once (default {@link DEFAULT_POOL_SIZE}; 1 to 1000; URL parameter `pool_size`). They are
   * opened only as concurrent callers need them (one caller at a time uses one) and closed
   * after 10 s idle. The advisory mode does not use it: a session keeps one connection (its
   * advisory locks belong to it) and sends the statements of all its callers on it without
   * waiting for each answer.
   */
  readonly poolSize?: number;
}

/** Checked, complete settings of a backend. */
export interface ResolvedPostgresOptions {
  /** Connection settings for dedicated connections (sessions and waiters). */
  readonly connection: PgConnectionConfig;
  /** The user's pool, when given (used for migrations only). */
  readonly pool: PgPoolLike | undefined;
  /** Unquoted schema name. */
  readonly schema: string;
  /** Quoted schema name, safe to put in SQL text. */
  readonly quotedSchema: string;
  readonly namespace: string;
  readonly migrate: boolean;
  readonly locks: PostgresLockMode;
  readonly poolSize: number;
}

const OPTION_KEYS = new Set([
  "url",
  "pool",
  "config",
  "schema",
  "namespace",
  "migrate",
  "locks",
  "poolSize",
]);
const URL_PARAMS = new Set([
  "schema",
  "namespace",
  "locks",
  "pool_size",
  "application_name",
  "sslmode",
  "connect_timeout",
  "host",
  "port",
]);
const SSL_MODES = [
  "disable",
  "allow",
  "prefer",
  "require",
  "verify-ca",
  "verify-full",
  "no-verify",
] as const;

/** Checks options before any I/O; throws `ConfigError` naming the field. */
export function resolvePostgresOptions(options: PostgresBackendOptions): ResolvedPostgresOptions {
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
  let connection: PgConnectionConfig;
  let schema = options.schema;
  let namespace = options.namespace;
  let locks = options.locks;
  let poolSize = options.poolSize;
  if (options.url !== undefined) {
    const fromUrl = connectionFromUrl(parseBackendUrl(options.url));
    connection = fromUrl.connection;
    schema ??= fromUrl.schema;
    namespace ??= fromUrl.namespace;
    locks ??= fromUrl.locks;
    poolSize ??= fromUrl.poolSize;
  } else if (options.pool !== undefined) {
    const pool = options.pool as Partial<PgPoolLike> | null;
    if (
      typeof pool !== "object" ||
      pool === null ||
      typeof pool.query !== "function" ||
      typeof pool.options !== "object" ||
      pool.options === null
    ) {
      throw new ConfigError("pool", "must be a pg.Pool");
    }
    connection = { ...pool.options };
  } else {
    if (typeof options.config !== "object" || options.config === null) {
      throw new ConfigError("config", "must be a pg ClientConfig object");
    }
    connection = { ...options.config };
  }
  schema ??= DEFAULT_SCHEMA;
  namespace ??= DEFAULT_NAMESPACE;
  const quotedSchema = quoteIdentifier(schema, "schema");
  if (typeof namespace !== "string" || namespace.length === 0 || namespace.length > 256) {
    throw new ConfigError("namespace", "must be a non-empty string of at most 256 characters");
  }
  if (locks !== undefined && !LOCK_MODES.includes(locks)) {
    throw new ConfigError(
      "locks",
      `must be one of ${LOCK_MODES.join(", ")}, got ${JSON.stringify(locks)}`,
    );
  }
  if (
    poolSize !== undefined &&
    !(Number.isInteger(poolSize) && poolSize >= 1 && poolSize <= MAX_POOL_SIZE)
  ) {
    throw new ConfigError(
      "poolSize",
      `must be a whole number from 1 to ${MAX_POOL_SIZE}, got ${JSON.stringify(poolSize)}`,
    );
  }
  if (options.migrate !== undefined && typeof options.migrate !== "boolean") {
    throw new ConfigError("migrate", `must be a boolean, got ${typeof options.migrate}`);
  }
  return {
    connection,
    pool: options.pool,
    schema,
    quotedSchema,
    namespace,
    migrate: options.migrate ?? DEFAULT_MIGRATE,
    locks: locks ?? DEFAULT_LOCKS,
    poolSize: poolSize ?? DEFAULT_POOL_SIZE,
  };
}

/**
 * The options of a parsed `postgres://` or `postgresql://` URL (see
 * {@link PostgresBackendOptions.url}): `config` with its connection settings, and `schema` and
 * `namespace` when it gives them. Checks them as the backend does, without any I/O; throws
 * `ConfigError` on anything unknown or malformed.
 */
export function postgresOptionsFromUrl(url: BackendUrl): PostgresBackendOptions {
  const fromUrl = connectionFromUrl(url);
  const options: PostgresBackendOptions = {
    config: fromUrl.connection,
    ...(fromUrl.schema === undefined ? {} : { schema: fromUrl.schema }),
    ...(fromUrl.namespace === undefined ? {} : { namespace: fromUrl.namespace }),
    ...(fromUrl.locks === undefined ? {} : { locks: fromUrl.locks }),
    ...(fromUrl.poolSize === undefined ? {} : { poolSize: fromUrl.poolSize }),
  };
  resolvePostgresOptions(options);
  return options;
}

/** `T` with its members writable. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** `pg` settings from a parsed `postgres://` URL. */
export function connectionFromUrl(url: BackendUrl): {
  connection: PgConnectionConfig;
  schema: string | undefined;
  namespace: string | undefined;
  locks: PostgresLockMode | undefined;
  poolSize: number | undefined;
} {
  if (url.scheme !== "postgres" && url.scheme !== "postgresql") {
    throw new ConfigError(
      "url",
      `must start with postgres:// or postgresql://, got "${url.scheme}:"`,
    );
  }
  if (url.hosts.length > 1) {
    throw new ConfigError(
      "url",
      "names more than one host; Baton's PostgreSQL locks live on one primary (give its address)",
    );
  }
  for (const key of url.searchParams.keys()) {
    if (!URL_PARAMS.has(key)) {
      throw new ConfigError("url", `unknown parameter "${key}"; use ${[...URL_PARAMS].join(", ")}`);
    }
  }
  const database = url.pathname.replace(/^\/+/, "");
  if (database.includes("/")) {
    throw new ConfigError("url", `has a bad database name "${database}"`);
  }
  const params = url.searchParams;
  const socketDir = params.get("host");
  if (socketDir !== null) {
    if (!socketDir.startsWith("/")) {
      throw new ConfigError(
        "url",
        `the parameter "host" must be a unix socket directory (an absolute path such as /var/run/postgresql), got "${socketDir}"; put a host name after "//"`,
      );
    }
    if (url.hosts.length > 0) {
      throw new ConfigError(
        "url",
        'gives a host after "//" and the parameter "host"; give one (postgres:///db?host=/var/run/postgresql for a unix socket)',
      );
    }
  }
  const host = url.hosts[0];
  const portText = params.get("port");
  const portNumber = portText !== null && /^\d{1,5}$/.test(portText) ? Number(portText) : 0;
  if (portText !== null && !(portNumber >= 1 && portNumber <= 65_535)) {
    throw new ConfigError(
      "url",
      `the parameter "port" must be a number from 1 to 65535, got "${portText}"`,
    );
  }
  if (portText !== null && host?.port !== undefined) {
    throw new ConfigError("url", 'gives a port after the host and the parameter "port"; give one');
  }
  const connection: Mutable<PgConnectionConfig> = {
    host: socketDir ?? host?.host ?? "localhost",
    port: host?.port ?? (portText === null ? 5432 : portNumber),
    ...(url.username === "" ? {} : { user: url.username }),
    ...(url.password === "" ? {} : { password: url.password }),
    ...(database === "" ? {} : { database }),
  };
  const appName = params.get("application_name");
  if (appName !== null) connection.application_name = appName;
  const sslmode = params.get("sslmode");
  if (sslmode !== null) {
    if (!(SSL_MODES as readonly string[]).includes(sslmode)) {
      throw new ConfigError(
        "url",
        `the parameter "sslmode" must be one of ${SSL_MODES.join(", ")}, got "${sslmode}"`,
      );
    }
    connection.ssl = sslFromMode(sslmode as (typeof SSL_MODES)[number]);
  }
  const timeout = params.get("connect_timeout");
  if (timeout !== null) connection.connectionTimeoutMillis = connectTimeoutMs(timeout);
  return {
    connection,
    schema: url.searchParams.get("schema") ?? undefined,
    namespace: url.searchParams.get("namespace") ?? undefined,
    locks: lockModeParam(url.searchParams.get("locks")),
    poolSize: poolSizeParam(url.searchParams.get("pool_size")),
  };
}

/** The `locks` URL parameter, checked. */
function lockModeParam(text: string | null): PostgresLockMode | undefined {
  if (text === null) return undefined;
  if (!(LOCK_MODES as readonly string[]).includes(text)) {
    throw new ConfigError(
      "url",
      `the parameter "locks" must be one of ${LOCK_MODES.join(", ")}, got "${text}"`,
    );
  }
  return text as PostgresLockMode;
}

/** The `pool_size` URL parameter, checked. */
function poolSizeParam(text: string | null): number | undefined {
  if (text === null) return undefined;
  if (!/^\d{1,4}$/.test(text) || Number(text) < 1 || Number(text) > MAX_POOL_SIZE) {
    throw new ConfigError(
      "url",
      `the parameter "pool_size" must be a whole number from 1 to ${MAX_POOL_SIZE}, got "${text}"`,
    );
  }
  return Number(text);
}

/**
 * `pg`'s TLS setting for a libpq `sslmode`. `pg` makes one connection attempt, so the two modes
 * that fall back in libpq cannot: `allow` connects without TLS (libpq's first attempt), and
 * `prefer` insists on TLS (a server without TLS refuses it) rather than silently connecting
 * without it.
 *
 * - `disable`, `allow`: no TLS.
 * - `prefer`, `require`, `no-verify`: TLS, the certificate not checked (libpq's `require`).
 * - `verify-ca`: TLS, the certificate chain checked against Node's trusted CAs, not the host name.
 * - `verify-full`: TLS, the chain and the host name checked.
 *
 * For your own CA or a client certificate, pass `config` with `pg`'s `ssl` options instead.
 */
function sslFromMode(mode: (typeof SSL_MODES)[number]): PgConnectionConfig["ssl"] {
  switch (mode) {
    case "disable":
    case "allow":
      return false;
    case "prefer":
    case "require":
    case "no-verify":
      return { rejectUnauthorized: false };
    case "verify-ca":
      return { checkServerIdentity: () => undefined };
    case "verify-full":
      return true;
  }
}

/**
 * `pg`'s `connectionTimeoutMillis` for libpq's `connect_timeout`: whole seconds, `0` for no
 * limit, and (as libpq) at least 2 seconds.
 */
function connectTimeoutMs(text: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 86_400) {
    throw new ConfigError(
      "url",
      `the parameter "connect_timeout" must be whole seconds from 0 (no limit) to 86400, got "${text}"`,
    );
  }
  const seconds = Number(text);
  return seconds === 0 ? 0 : Math.max(2, seconds) * 1_000;
}
