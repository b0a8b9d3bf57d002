import {
  asUnavailable,
  BackendUnavailableError,
  BatonError,
  ConfigError,
  isTransient,
} from "@baton/core";
import type pg from "pg";

/** The SQLSTATE of a PostgreSQL error, when it is one. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** True for a missing privilege (SQLSTATE 42501). */
export function isPrivilegeError(error: unknown): boolean {
  return sqlState(error) === "42501";
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
export function describeTarget(connection: pg.ClientConfig): string {
  const host = connection.host ?? "localhost";
  const at = host.startsWith("/")
    ? `${host} (unix socket)`
    : `${host.includes(":") ? `[${host}]` : host}:${connection.port ?? 5432}`;
  return connection.database === undefined ? at : `${at}/${connection.database}`;
}

/**
 * Turns an error of connecting or querying into Baton's: bad credentials, a missing database
 * or a server too old into `ConfigError`, everything else into `BackendUnavailableError`. A
 * connection that could not be made, or that the server ended (a restart, `57P01`), says so
 * and names `where` (see {@link describeTarget}) instead of what was being done.
 */
export function asBatonError(error: unknown, context: string, where?: string): Error {
  if (error instanceof BatonError) return error;
  const state = sqlState(error);
  const detail = error instanceof Error ? error.message : String(error);
  const at = where === undefined ? "" : ` at ${where}`;
  if (state !== undefined && (SERVER_GONE[state] !== undefined || state.startsWith("08"))) {
    const what = SERVER_GONE[state] ?? "the connection to the server failed";
    return new BackendUnavailableError(
      `${context}: ${what}${at} (SQLSTATE ${state}: ${detail}); Baton retries once the server is back`,
      { cause: error },
    );
  }
  if (state === undefined && isConnectFailure(error)) {
    return new BackendUnavailableError(
      `could not connect to PostgreSQL${at} (${detail}); check that the server runs there and accepts connections from here`,
      { cause: error },
    );
  }
  switch (state) {
    case "28P01":
    case "28000":
      return new ConfigError("url", `${context}: the server refused the login: ${detail}`, {
        cause: error,
      });
    case "3D000":
      return new ConfigError("url", `${context}: ${detail}`, { cause: error });
    case "42501":
      return new ConfigError("privileges", `${context}: ${detail}`, { cause: error });
    case "42704":
      if (detail.includes("idle_session_timeout")) {
        return new ConfigError(
          "url",
          `${context}: the server lacks idle_session_timeout; Baton's PostgreSQL leases need PostgreSQL 14 or newer`,
          { cause: error },
        );
      }
      break;
  }
  return asUnavailable(error, context);
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
