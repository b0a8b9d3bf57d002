import {
  AuthenticationError,
  BackendUnavailableError,
  BatonError,
  ConfigError,
  isTransient,
} from "@baton/core";
import type { MysqlConnectionConfig } from "./mysql-shapes.js";

/** The server error numbers Baton tells apart (named as in the MySQL and MariaDB manuals). */
export const ER = {
  /** A grant of the database is missing. */
  dbAccessDenied: 1044,
  /** The server refused the login. */
  accessDenied: 1045,
  /** The database does not exist. */
  badDb: 1049,
  /** The server is shutting down. */
  serverShutdown: 1053,
  /** The server takes no more connections (`max_connections`). */
  tooManyConnections: 1040,
  /** A unique key already holds the row. */
  dupEntry: 1062,
  /** A privilege on a table is missing. */
  tableAccessDenied: 1142,
  /** A table is missing: Baton's tables before `migrate()`. */
  noSuchTable: 1146,
  /** `innodb_lock_wait_timeout` ran out. */
  lockWaitTimeout: 1205,
  /** InnoDB broke a cycle of transactions waiting for each other. */
  lockDeadlock: 1213,
  /** A privilege such as SUPER or PROCESS is missing. */
  specificAccessDenied: 1227,
  /** The statement was interrupted (`KILL QUERY`, or the server's statement time limit). */
  queryInterrupted: 1317,
  /** MariaDB: the connection was killed. */
  connectionKilled: 1927,
  /** MariaDB: `max_statement_time` ran out. */
  statementTimeout: 1969,
  /** MySQL: `max_execution_time` ran out. */
  executionTimeout: 3024,
  /** MySQL 8.0.24+: the server ended an idle connection (`wait_timeout`). */
  clientIdleTimeout: 4031,
} as const;

/** The server error number of a mysql2 error, when it is one from the server. */
export function errorNumber(error: unknown): number | undefined {
  const errno = (error as { errno?: unknown } | null)?.errno;
  return typeof errno === "number" && errno >= 1000 ? errno : undefined;
}

/** mysql2's code of an error (`ER_DUP_ENTRY`, `ECONNREFUSED`, `PROTOCOL_CONNECTION_LOST`). */
function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Server errors that mean the server ended the connection or takes none for now. */
const SERVER_GONE: Readonly<Record<number, string>> = {
  [ER.serverShutdown]: "the server is shutting down",
  [ER.tooManyConnections]: "the server takes no more connections (max_connections)",
  [ER.connectionKilled]: "the server ended the connection (KILL, or a restart)",
  [ER.clientIdleTimeout]: "the server ended the idle connection (wait_timeout)",
};

/** Errors of a statement that ended without effect and may be tried again. */
const ENDED_EMPTY: ReadonlySet<number> = new Set([
  ER.lockWaitTimeout,
  ER.lockDeadlock,
  ER.queryInterrupted,
  ER.statementTimeout,
  ER.executionTimeout,
]);

/** mysql2's codes for a connection that could not be made, or went away. */
const CONNECTION_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENOENT",
  "PROTOCOL_CONNECTION_LOST",
  "PROTOCOL_SEQUENCE_TIMEOUT",
  "PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR",
  "PROTOCOL_ENQUEUE_AFTER_QUIT",
]);

/** True when `error` says the connection it came from is unusable (mysql2's `fatal`). */
export function isFatal(error: unknown): boolean {
  return (error as { fatal?: unknown } | null)?.fatal === true;
}

/**
 * Where a connection goes, for messages: `host:port/database` or the socket's path; never the
 * user or password.
 */
export function describeTarget(connection: MysqlConnectionConfig): string {
  const at = endpointOf(connection);
  return connection.database === undefined ? at : `${at}/${connection.database}`;
}

/** Where `connection` connects, for messages: `db1:3306`, `[::1]:3306` or a socket's path. */
export function endpointOf(connection: MysqlConnectionConfig): string {
  if (typeof connection.socketPath === "string") return connection.socketPath;
  const host = connection.host ?? "localhost";
  return `${host.includes(":") ? `[${host}]` : host}:${connection.port ?? 3306}`;
}

/** The context of {@link toBatonError} for opening a session at `connection`. */
export function openSessionContext(connection: MysqlConnectionConfig): string {
  return `could not open a MySQL session at ${describeTarget(connection)}`;
}

/**
 * The one place mysql2's errors become Baton's. `context` says what was being done, and where
 * (`mysql acquire of "invoices" at db1:3306/app`). A `BatonError` passes through unchanged. Bad
 * credentials are an `AuthenticationError` (a `ConfigError`, never retried); a missing
 * database, a missing privilege or a missing table a `ConfigError`; a connection that could not
 * be made or that the server ended (a restart, a kill) says so; that and everything else is a
 * `BackendUnavailableError`.
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const errno = errorNumber(error);
  const code = errorCode(error);
  const detail = error instanceof Error ? error.message : String(error);
  switch (errno) {
    case ER.accessDenied:
      return new AuthenticationError("url", `${context}: the server refused the login: ${detail}`, {
        cause: error,
      });
    case ER.badDb:
      return new ConfigError("url", `${context}: ${detail}`, { cause: error });
    case ER.dbAccessDenied:
    case ER.tableAccessDenied:
    case ER.specificAccessDenied:
      return new ConfigError("privileges", `${context}: ${detail}`, { cause: error });
    case ER.noSuchTable:
      return new ConfigError(
        "schema",
        `${context}: ${detail}; run migrate() once (as a user that may create tables in the database) to create Baton's tables`,
        { cause: error },
      );
  }
  if (errno !== undefined && SERVER_GONE[errno] !== undefined) {
    return new BackendUnavailableError(
      `${context}: ${SERVER_GONE[errno]} (${detail}); Baton retries once the server is back`,
      { cause: error },
    );
  }
  if (errno !== undefined && ENDED_EMPTY.has(errno)) {
    return new BackendUnavailableError(
      `${context}: the statement ended without effect (${detail})`,
      {
        cause: error,
      },
    );
  }
  if (
    errno === undefined &&
    ((code !== undefined && CONNECTION_CODES.has(code)) || isTransient(error))
  ) {
    return new BackendUnavailableError(
      `${context}: the connection failed or could not be made (${detail}); check that the server runs there and accepts connections from here`,
      { cause: error },
    );
  }
  return new BackendUnavailableError(`${context}: ${detail}`, { cause: error });
}
