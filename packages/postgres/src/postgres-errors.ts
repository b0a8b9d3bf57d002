import {
  AuthenticationError,
  BackendUnavailableError,
  BatonError,
  ConfigError,
  isTransient,
} from "@baton/core";
import type { PgConnectionConfig } from "./pg-shapes.js";

/** The SQLSTATEs Baton tells apart (named as in PostgreSQL's list of error codes). */
export const SQLSTATE = {
  /** A statement cancelled (`pg_cancel_backend`, `statement_timeout`). */
  queryCanceled: "57014",
  /** `lock_timeout` ran out. */
  lockNotAvailable: "55P03",
  /** PostgreSQL broke a cycle of sessions waiting for each other's locks. */
  deadlockDetected: "40P01",
  insufficientPrivilege: "42501",
  uniqueViolation: "23505",
  /** A row names a missing one: a row lease of a session that was reaped meanwhile. */
  foreignKeyViolation: "23503",
  invalidPassword: "28P01",
  invalidAuthorization: "28000",
  /** The database does not exist. */
  invalidCatalogName: "3D000",
  /** E.g. a setting the server does not know (`idle_session_timeout` before PostgreSQL 14). */
  undefinedObject: "42704",
  /** A table (or a schema's) is missing: e.g. the records table before `migrate()`. */
  undefinedTable: "42P01",
  /** A function is missing: e.g. the permit functions before `migrate()`. */
  undefinedFunction: "42883",
  connectionDoesNotExist: "08003",
  /** A named prepared statement the connection does not have. */
  invalidStatementName: "26000",
  /** `out of shared memory`: among others, the server's shared lock table is full. */
  outOfMemory: "53200",
  connectionFailure: "08006",
} as const;

/** The SQLSTATE of a PostgreSQL error, when it is one. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** True for a missing privilege (SQLSTATE 42501). */
export function isPrivilegeError(error: unknown): boolean {
  return sqlState(error) === SQLSTATE.insufficientPrivilege;
}

/**
 * True when the server's shared lock table is full (SQLSTATE 53200 with PostgreSQL's hint to
 * raise `max_locks_per_transaction`), for `error` or the error it was made from.
 */
export function lockTableFull(error: unknown): boolean {
  const e = pgErrorOf(error);
  if (e === undefined || sqlState(e) !== SQLSTATE.outOfMemory) return false;
  const { hint } = e as { hint?: unknown };
  return `${typeof hint === "string" ? hint : ""} ${e.message}`.includes(
    "max_locks_per_transaction",
  );
}

/** `error` or the error it was made from (a cause, up to three deep) that has a SQLSTATE. */
function pgErrorOf(error: unknown): Error | undefined {
  let e = error;
  for (let depth = 0; e instanceof Error && depth < 3; depth++) {
    if (sqlState(e) !== undefined) return e;
    e = e.cause;
  }
  return undefined;
}

/**
 * True when a statement failed because its named prepared statement was never made: in pg's
 * pipeline mode a statement sent while the first parse of the same name is still in flight
 * fails this way when that parse fails (the next use parses it again).
 */
export function missingPrepared(error: unknown): boolean {
  return sqlState(pgErrorOf(error)) === SQLSTATE.invalidStatementName;
}

/**
 * True when the server ended the connection the statement ran on: class 57P (a shutdown, a
 * restart, `pg_terminate_backend`, a crash, `idle_session_timeout`), 08006 or 08003.
 */
export function endedConnection(error: unknown): boolean {
  const state = sqlState(error);
  return (
    state?.startsWith("57P") === true ||
    state === SQLSTATE.connectionFailure ||
    state === SQLSTATE.connectionDoesNotExist
  );
}

/**
 * True when a wait for a lock ended without it and without harm: cancelled (interrupted or
 * aborted), `lock_timeout` ran out (a slice), or PostgreSQL broke a cycle of sessions waiting
 * for each other's locks (which Baton, like any lock, lets callers build: their waits then run
 * out as they would anyway).
 */
export function waitEndedEmpty(error: unknown): boolean {
  const state = sqlState(error);
  return (
    state === SQLSTATE.queryCanceled ||
    state === SQLSTATE.lockNotAvailable ||
    state === SQLSTATE.deadlockDetected
  );
}

/**
 * SQLSTATEs of a server that ended the connection or takes none for now: a restart, a
 * shutdown, `pg_terminate_backend`, a crash, no free slots. What each means, for messages.
 */
const SERVER_GONE: Readonly<Record<string, string>> = {
  "57P01":
    "the server ended the connection (admin_shutdown: it is shutting down or restarting, or an administrator terminated this backend)",
  "57P02": "the server ended the connection after a crash of another backend (crash_shutdown)",
  "57P03":
    "the server is starting up or shutting down and takes no connections yet (cannot_connect_now)",
  "57P05": "the server ended the connection after idle_session_timeout",
  "53300": "the server has no free connection slots (too_many_connections)",
};

/**
 * Where a connection goes, for messages: `host:port/database` or the socket directory; never
 * the user or password.
 */
export function describeTarget(connection: PgConnectionConfig): string {
  const endpoint = endpointOf(connection) ?? `localhost:${connection.port ?? 5432}`;
  const at = endpoint.startsWith("/") ? `${endpoint} (unix socket)` : endpoint;
  return connection.database === undefined ? at : `${at}/${connection.database}`;
}

/**
 * Where `connection` connects, for messages: `db1:5432`, `[::1]:5432`, or a unix socket's
 * directory; from its `host` and `port`, or else the host and port of its `connectionString`.
 * Never its user, password or database. Undefined when nothing says.
 */
export function endpointOf(connection: PgConnectionConfig): string | undefined {
  let host: string | undefined = connection.host;
  let port: number | string | undefined = connection.port;
  const text = (connection as { connectionString?: unknown }).connectionString;
  if (host === undefined && typeof text === "string") {
    try {
      const parsed = new URL(text);
      host = decodeURIComponent(parsed.hostname).replace(/^\[(.*)\]$/, "$1") || undefined;
      port = parsed.port === "" ? undefined : parsed.port;
      // A socket directory given as ?host=/run/postgresql.
      host ??= parsed.searchParams.get("host") ?? undefined;
    } catch {
      return undefined;
    }
  }
  if (host === undefined) return undefined;
  if (host.startsWith("/")) return host;
  return `${host.includes(":") ? `[${host}]` : host}:${port ?? 5432}`;
}

/**
 * The context of {@link toBatonError} for opening a session at `connection`, schema checks
 * included: a failure to connect then names the server, not a step.
 */
export function openSessionContext(connection: PgConnectionConfig): string {
  return `could not open a PostgreSQL session at ${describeTarget(connection)}`;
}

/**
 * The one place pg's errors become Baton's. `context` says what was being done, and where
 * when it connected somewhere (`could not open a PostgreSQL session at db1:5432/app`, see
 * {@link describeTarget}). A `BatonError` passes through unchanged. Bad credentials are an
 * `AuthenticationError` (a `ConfigError`, never retried); a missing database, a missing
 * privilege or a server too old a `ConfigError`; a connection that could not be made, or that
 * the server ended (a restart, `57P01`), says so, and that and everything else is a
 * `BackendUnavailableError`.
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const state = sqlState(error);
  const detail = error instanceof Error ? error.message : String(error);
  if (state !== undefined && (SERVER_GONE[state] !== undefined || state.startsWith("08"))) {
    const what = SERVER_GONE[state] ?? "the connection to the server failed";
    return new BackendUnavailableError(
      `${context}: ${what} (SQLSTATE ${state}: ${detail}); Baton retries once the server is back`,
      { cause: error },
    );
  }
  if (state === undefined && isConnectFailure(error)) {
    return new BackendUnavailableError(
      `${context}: could not connect (${detail}); check that the server runs there and accepts connections from here`,
      { cause: error },
    );
  }
  if (lockTableFull(error)) {
    return new ConfigError(
      "max_locks_per_transaction",
      `${context}: the server's lock table is full (${detail}). Each lock a session holds takes an entry of PostgreSQL's shared lock table, which has room for about max_locks_per_transaction x (max_connections + max_prepared_transactions) entries over all connections; raise max_locks_per_transaction on the server (a restart applies it) or hold fewer locks at once`,
      { cause: error },
    );
  }
  switch (state) {
    case SQLSTATE.invalidPassword:
    case SQLSTATE.invalidAuthorization:
      return new AuthenticationError("url", `${context}: the server refused the login: ${detail}`, {
        cause: error,
      });
    case SQLSTATE.invalidCatalogName:
      return new ConfigError("url", `${context}: ${detail}`, { cause: error });
    case SQLSTATE.insufficientPrivilege:
      return new ConfigError("privileges", `${context}: ${detail}`, { cause: error });
    case SQLSTATE.undefinedObject:
      if (detail.includes("idle_session_timeout")) {
        return new ConfigError(
          "url",
          `${context}: the server lacks idle_session_timeout; Baton's PostgreSQL leases need PostgreSQL 14 or newer`,
          { cause: error },
        );
      }
      break;
  }
  return new BackendUnavailableError(`${context}: ${detail}`, { cause: error });
}

/** A connection that could not be made or went away: a network error, or pg's own timeout. */
function isConnectFailure(error: unknown): boolean {
  if (isTransient(error)) return true;
  const message = error instanceof Error ? error.message : "";
  return (
    message.includes("timeout expired") ||
    message.includes("Connection terminated") ||
    (error as { code?: unknown } | null)?.code === "ENOTFOUND"
  );
}
