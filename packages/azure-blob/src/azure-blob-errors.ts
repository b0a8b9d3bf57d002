import { AuthenticationError, BackendUnavailableError, BatonError, ConfigError } from "@baton/core";
import { AzureErrorCode, HttpStatus } from "./azure-blob-codec.js";

/** The HTTP status of a failed Azure request, or `undefined` (no reply: a network failure). */
export function statusOf(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === "number" ? status : undefined;
}

/**
 * Azure's error code of a failed request (`x-ms-error-code`: `ConditionNotMet`,
 * `LeaseAlreadyPresent`, ...), or the network error's code (`ECONNREFUSED`). A reply to a HEAD
 * request has no body: its code is read from the headers.
 */
export function errorCodeOf(error: unknown): string | undefined {
  const e = error as { details?: { errorCode?: unknown }; code?: unknown } | null;
  const fromHeaders = e?.details?.errorCode;
  if (typeof fromHeaders === "string") return fromHeaders;
  return typeof e?.code === "string" ? e.code : undefined;
}

/** A short description of a failed Azure request for messages: status, code, first line. */
function detailOf(error: unknown): string {
  const status = statusOf(error);
  const code = errorCodeOf(error);
  const message = error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error);
  const head = [status, code].filter((x) => x !== undefined).join(" ");
  return head === "" ? message : `${head}: ${message}`;
}

/** True for the error of a request the SDK aborted (our bound ran out). */
function isAbort(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === "AbortError";
}

/**
 * Maps an error of the Azure SDK, met while doing `context` (which names the endpoint and
 * container), to Baton's named errors: a `BatonError` passes through; refused credentials
 * (403) are an `AuthenticationError` (a `ConfigError`) naming `credentials`, a missing
 * container a `ConfigError` naming `container`
 * (retrying cannot help either); anything else (network failures, timeouts, 5xx, throttling)
 * a `BackendUnavailableError`, never "held".
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const status = statusOf(error);
  const detail = detailOf(error);
  if (status === HttpStatus.forbidden) {
    return new AuthenticationError(
      "credentials",
      `${context}: Azure refused them (${detail}); check the account name and key, or the SAS token's permissions (read, write, delete on blobs)`,
      { cause: error },
    );
  }
  if (status === HttpStatus.notFound && errorCodeOf(error) === AzureErrorCode.containerNotFound) {
    return new ConfigError(
      "container",
      `${context}: the container does not exist; create it, or let the backend create it (createContainer: true)`,
      { cause: error },
    );
  }
  if (isAbort(error)) {
    return new BackendUnavailableError(`${context}: the request was given up (${detail})`, {
      cause: error,
    });
  }
  return new BackendUnavailableError(
    `${context}: ${detail}; check that Azure Blob Storage (or Azurite) runs there and is reachable`,
    { cause: error },
  );
}
