import { BackendUnavailableError, BatonError } from "@baton/core";

/**
 * The one place an ioredis error becomes Baton's. A `BatonError` passes through unchanged;
 * anything else (a refused or closed connection, a command ioredis gave up on, a reply error
 * of the server) is a `BackendUnavailableError` that says what was being done and why:
 * `<context>: <the client's message>`, with the client's error as its cause. Never "held":
 * a lock that is taken is an answer of the scripts, not an error.
 *
 * `context` is what was being done, e.g. `redis acquire of "invoices"`.
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new BackendUnavailableError(`${context}: ${detail}`, { cause: error });
}
