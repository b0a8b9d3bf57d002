/**
 * What Baton needs of the `mysql2` objects an application may pass it, described by shape: the
 * published declarations never import `mysql2`'s own types, so a `mysql2` release whose
 * declarations change cannot break an application's strict build. `mysql2`'s pools (its
 * callback `Pool` and the `mysql2/promise` one) and connections have every member listed here.
 */

/**
 * Connection settings as `mysql2` reads them (its `ConnectionOptions`, or the settings of a
 * pool's connections). Baton opens its own connections with them; the members listed are the
 * ones it reads, and whatever else is given is passed to `mysql2` as given.
 */
export interface MysqlConnectionConfig {
  readonly host?: string | undefined;
  readonly port?: number | undefined;
  /** A unix socket's path, instead of `host` and `port`. */
  readonly socketPath?: string | undefined;
  readonly user?: string | undefined;
  readonly password?: string | undefined;
  /** The database Baton's tables live in (required: Baton names no other). */
  readonly database?: string | undefined;
  /** How long making a connection may take, ms. */
  readonly connectTimeout?: number | undefined;
  /** A TLS profile name or TLS options, passed to `mysql2` as given. */
  readonly ssl?: unknown;
  /** Any other `mysql2` connection option, passed as given. */
  readonly [option: string]: unknown;
}

/** A statement as `mysql2`'s callback `query` takes it: the text, `?` values, and reply options. */
export interface MysqlQueryOptions {
  readonly sql: string;
  readonly values?: unknown[];
  /** Big numbers (BIGINT, DECIMAL) as strings, so no token loses precision. */
  readonly supportBigNumbers?: boolean;
  readonly bigNumberStrings?: boolean;
}

/**
 * Something that runs a statement with `mysql2`'s callback API: a callback `Pool`,
 * `PoolConnection` or `Connection` (the core object behind each `mysql2/promise` one). `result`
 * is the rows of a `SELECT`, an OK packet (`affectedRows`, `insertId`) for other statements, or
 * an array of those when several statements were sent at once.
 */
export interface MysqlCallbackQueryable {
  query(
    options: MysqlQueryOptions,
    callback: (error: Error | null, result: unknown) => unknown,
  ): unknown;
}

/**
 * A `mysql2` callback `Pool` (or the core pool of a `mysql2/promise` pool): Baton reads the
 * settings its connections are made with (`config.connectionConfig`).
 */
export interface MysqlCorePoolLike extends MysqlCallbackQueryable {
  readonly config: unknown;
}

/** A `mysql2/promise` pool: Baton uses the core pool behind it (`pool`). */
export interface MysqlPromisePoolLike {
  readonly pool: MysqlCorePoolLike;
}

/** A `mysql2` pool, callback (`mysql2`) or promise (`mysql2/promise`) API. */
export type MysqlPoolLike = MysqlCorePoolLike | MysqlPromisePoolLike;

/**
 * A `mysql2/promise` connection (`Connection` or `PoolConnection`): Baton runs its statements on
 * the core connection behind it (its `connection` property, which `mysql2`'s declarations do
 * not list).
 */
export interface MysqlPromiseConnectionLike {
  query(sql: string): Promise<unknown>;
}

/**
 * Where {@link migrate} runs its statements: a `mysql2` pool or connection, callback or promise
 * API.
 */
export type MysqlQueryable =
  | MysqlCallbackQueryable
  | MysqlPromisePoolLike
  | MysqlPromiseConnectionLike;

/** The callback queryable behind `target` (the core pool or connection of a promise one). */
export function callbackQueryable(target: MysqlQueryable): MysqlCallbackQueryable {
  const inner =
    (target as Partial<MysqlPromisePoolLike>).pool ??
    (target as { connection?: MysqlCallbackQueryable }).connection;
  if (inner !== undefined && typeof inner === "object" && typeof inner.query === "function") {
    return inner;
  }
  return target as MysqlCallbackQueryable;
}

/** `options`' connection settings, read from a pool (`config.connectionConfig`). */
export function poolConnectionConfig(pool: MysqlPoolLike): MysqlConnectionConfig | undefined {
  const core = (pool as Partial<MysqlPromisePoolLike>).pool ?? (pool as MysqlCorePoolLike);
  const config = (core as { config?: { connectionConfig?: unknown } } | undefined)?.config;
  const connection = config?.connectionConfig ?? config;
  return typeof connection === "object" && connection !== null
    ? (connection as MysqlConnectionConfig)
    : undefined;
}
