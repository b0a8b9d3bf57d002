import { asUnavailable, BatonError, ConfigError } from "@baton/core";

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
 * Turns an error of connecting or querying into Baton's: bad credentials, a missing database
 * or a server too old into `ConfigError`, everything else into `BackendUnavailableError`.
 */
export function asBatonError(error: unknown, context: string): Error {
  if (error instanceof BatonError) return error;
  const state = sqlState(error);
  const detail = error instanceof Error ? error.message : String(error);
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
