import { type BackendUrl, ConfigError, parseBackendUrl } from "@baton/core";
import type pg from "pg";
import { quoteIdentifier } from "./sql-identifier.js";

/** Options of {@link PostgresBackend}. Give exactly one of `url`, `pool` and `config`. */
export interface PostgresBackendOptions {
  /**
   * `postgres://user:password@host:port/database?schema=baton&namespace=baton` (also
   * `postgresql://`). Query parameters: `schema`, `namespace`, `application_name`,
   * `sslmode` (`disable`, `require`, `verify-full`).
   */
  readonly url?: string;
  /**
   * A `pg.Pool`. Baton reads its connection settings to open its own dedicated connections
   * (a pooled connection is never used to hold locks) and uses the pool itself only to create
   * the schema. Baton never ends a pool it was given.
   */
  readonly pool?: pg.Pool;
  /** `pg` connection settings for the dedicated connections. */
  readonly config?: pg.ClientConfig;
  /** Schema of Baton's table and token sequence. Default `baton`. */
  readonly schema?: string;
  /**
   * Namespace mixed into the hash of every lock name, so two applications sharing a database
   * can use the same names without meeting. Default `baton`.
   */
  readonly namespace?: string;
  /**
   * Create the schema, table and sequence on first use when missing (default `true`). With
   * `false`, run {@link migrate} once with a privileged role instead.
   */
  readonly migrate?: boolean;
}

/** Checked, complete settings of a backend. */
export interface ResolvedPostgresOptions {
  /** Connection settings for dedicated connections (sessions and waiters). */
  readonly connection: pg.ClientConfig;
  /** The user's pool, when given (used for migrations only). */
  readonly pool: pg.Pool | undefined;
  /** Unquoted schema name. */
  readonly schema: string;
  /** Quoted schema name, safe to put in SQL text. */
  readonly quotedSchema: string;
  readonly namespace: string;
  readonly migrate: boolean;
}

const OPTION_KEYS = new Set(["url", "pool", "config", "schema", "namespace", "migrate"]);
const URL_PARAMS = new Set(["schema", "namespace", "application_name", "sslmode"]);

/** Checks options before any I/O; throws `ConfigError` naming the field. */
export function resolvePostgresOptions(options: PostgresBackendOptions): ResolvedPostgresOptions {
  if (typeof options !== "object" || options === null) {
    throw new ConfigError("options", "must be an object with one of url, pool or config");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new ConfigError(`options.${key}`, `unknown option; use ${[...OPTION_KEYS].join(", ")}`);
    }
  }
  const given = ["url", "pool", "config"].filter(
    (k) => (options as Record<string, unknown>)[k] !== undefined,
  );
  if (given.length !== 1) {
    throw new ConfigError(
      "options",
      `give exactly one of url, pool and config (got ${given.length === 0 ? "none" : given.join(", ")})`,
    );
  }
  let connection: pg.ClientConfig;
  let schema = options.schema;
  let namespace = options.namespace;
  if (options.url !== undefined) {
    const fromUrl = connectionFromUrl(parseBackendUrl(options.url));
    connection = fromUrl.connection;
    schema ??= fromUrl.schema;
    namespace ??= fromUrl.namespace;
  } else if (options.pool !== undefined) {
    const pool = options.pool as Partial<pg.Pool>;
    if (typeof pool !== "object" || typeof pool.connect !== "function" || !pool.options) {
      throw new ConfigError("pool", "must be a pg.Pool");
    }
    connection = { ...(pool.options as pg.ClientConfig) };
  } else {
    if (typeof options.config !== "object" || options.config === null) {
      throw new ConfigError("config", "must be a pg ClientConfig object");
    }
    connection = { ...options.config };
  }
  schema ??= "baton";
  namespace ??= "baton";
  const quotedSchema = quoteIdentifier(schema, "schema");
  if (typeof namespace !== "string" || namespace.length === 0 || namespace.length > 256) {
    throw new ConfigError("namespace", "must be a non-empty string of at most 256 characters");
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
    migrate: options.migrate ?? true,
  };
}

/** `pg` settings from a parsed `postgres://` URL. */
export function connectionFromUrl(url: BackendUrl): {
  connection: pg.ClientConfig;
  schema: string | undefined;
  namespace: string | undefined;
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
  const host = url.hosts[0];
  const database = url.pathname.replace(/^\/+/, "");
  if (database.includes("/")) {
    throw new ConfigError("url", `has a bad database name "${database}"`);
  }
  const connection: pg.ClientConfig = {
    host: host?.host ?? "localhost",
    port: host?.port ?? 5432,
    ...(url.username === "" ? {} : { user: url.username }),
    ...(url.password === "" ? {} : { password: url.password }),
    ...(database === "" ? {} : { database }),
  };
  const appName = url.searchParams.get("application_name");
  if (appName !== null) connection.application_name = appName;
  const sslmode = url.searchParams.get("sslmode");
  if (sslmode !== null) {
    if (sslmode === "require") connection.ssl = { rejectUnauthorized: false };
    else if (sslmode === "verify-full") connection.ssl = true;
    else if (sslmode !== "disable") {
      throw new ConfigError(
        "url",
        `sslmode must be disable, require or verify-full, got "${sslmode}"`,
      );
    }
  }
  return {
    connection,
    schema: url.searchParams.get("schema") ?? undefined,
    namespace: url.searchParams.get("namespace") ?? undefined,
  };
}
