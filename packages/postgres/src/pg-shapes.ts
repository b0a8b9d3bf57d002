/**
 * What Baton needs of the `pg` objects an application may pass it, described by shape: the
 * published declarations never import `pg`'s own types, so a `pg` or `@types/pg` release with
 * broken declarations cannot break an application's strict build. `pg`'s `Pool`, `Client` and
 * `PoolClient` have every member listed here.
 */
import type { ConnectionOptions } from "node:tls";

/**
 * A query's result (a `pg.QueryResult` is one): its rows, one object per row keyed by column
 * name, and how many rows the statement returned or changed.
 */
// biome-ignore lint/suspicious/noExplicitAny: rows are typed by the caller, as pg types them
export interface PgResultLike<Row = any> {
  /** The rows, one object per row keyed by column name. */
  readonly rows: Row[];
  /** Rows returned or changed (`null` for a statement that reports none). */
  readonly rowCount: number | null;
}

/**
 * Something that runs one SQL statement with `$1`-style parameters: a `pg.Pool`, a
 * `pg.Client` or a `pg.PoolClient`. What {@link migrate} and {@link PgFence.check} use.
 */
export interface Queryable {
  /** Runs `text` with `values` for its parameters; `Row` types the rows (as pg's `query`). */
  // biome-ignore lint/suspicious/noExplicitAny: rows are typed by the caller, as pg types them
  query<Row = any>(text: string, values?: unknown[]): Promise<PgResultLike<Row>>;
}

/**
 * A client checked out of a pool, as {@link PgFence} uses it for one transaction (a
 * `pg.PoolClient` is one): statements, an `error` listener while it is checked out, `end()`
 * to cut off a transaction whose signal aborted, and `release()` to give it back (`true`: the
 * connection is broken, destroy it).
 */
export interface PgClientLike extends Queryable {
  /** Adds a listener of the connection's failure while the client is checked out. */
  on(event: "error", listener: (error: Error) => void): unknown;
  /** Removes a listener added with `on`. */
  removeListener(event: "error", listener: (error: Error) => void): unknown;
  /** Closes the connection. */
  end(): Promise<void>;
  /** Gives the client back to its pool; with `true` the pool destroys it instead. */
  release(destroy?: boolean): void;
}

/**
 * Connection settings, as `pg` reads them (a `pg.ClientConfig`; also the `options` of a
 * `pg.Pool`). Baton opens its own connections with them; the members listed are the ones it
 * knows, and whatever else `pg` accepts is passed to `pg` as given.
 */
export interface PgConnectionConfig {
  readonly connectionString?: string | undefined;
  readonly host?: string | undefined;
  readonly port?: number | undefined;
  readonly user?: string | undefined;
  /** The password, or a function returning it (for rotating credentials). */
  readonly password?: string | (() => string | Promise<string>) | undefined;
  readonly database?: string | undefined;
  /** `false`, `true` (checked TLS) or Node's TLS options. */
  readonly ssl?: boolean | ConnectionOptions | undefined;
  readonly application_name?: string | undefined;
  readonly fallback_application_name?: string | undefined;
  /** How long making a connection may take, ms (`0`: no limit). */
  readonly connectionTimeoutMillis?: number | undefined;
  readonly keepAlive?: boolean | undefined;
  readonly keepAliveInitialDelayMillis?: number | undefined;
  readonly statement_timeout?: false | number | undefined;
  readonly query_timeout?: number | undefined;
  readonly lock_timeout?: number | undefined;
  readonly idle_in_transaction_session_timeout?: number | undefined;
  readonly options?: string | undefined;
  readonly client_encoding?: string | undefined;
  readonly enableChannelBinding?: boolean | undefined;
  /** `"postgres"` (an SSLRequest first) or `"direct"` TLS negotiation. */
  readonly sslnegotiation?: "postgres" | "direct" | undefined;
  /** pg's pipeline mode (Baton's session connections run without it). */
  readonly pipeline?: boolean | undefined;
  /** Passed to `pg` as given (a function returning the socket to use). */
  readonly stream?: unknown;
  /** Passed to `pg` as given (custom type parsers). */
  readonly types?: unknown;
}

/**
 * A connection pool, as Baton uses one (a `pg.Pool` is one). {@link PostgresBackend} reads
 * `options` to open connections of its own and runs `query` to check or create its schema;
 * {@link PgFence} takes clients with `connect()` for its transactions. `Client` is the type of
 * the clients `connect()` gives (`pg.PoolClient` for a `pg.Pool`).
 */
export interface PgPoolLike<Client extends PgClientLike = PgClientLike> extends Queryable {
  /** The settings the pool opens its connections with. */
  readonly options: PgConnectionConfig;
  /** A client of the pool, to be given back with `release()`. */
  connect(): Promise<Client>;
}
