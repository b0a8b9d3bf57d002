import { BackendUnavailableError } from "./errors.js";

/**
 * Node.js system error codes of a network failure that may pass: the connection was refused,
 * reset, cut or timed out, or a name server did not answer. `ENOTFOUND` is not among them: a
 * host name that does not resolve is far more often a typo than an outage.
 */
const TRANSIENT_SYSTEM_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENETRESET",
  "EAI_AGAIN",
]);

/**
 * True when `error` is known to be worth trying again: a `BackendUnavailableError` (what
 * adapters turn store and network failures into), or a Node.js network error whose `code` is
 * one of a connection refused, reset or timed out. Anything else (another Baton error, a
 * `TypeError`, a `URIError`, a driver error no adapter mapped) is not retried: `acquire`
 * rejects with it at once instead of trying until its wait runs out.
 */
export function isTransient(error: unknown): boolean {
  if (error instanceof BackendUnavailableError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && TRANSIENT_SYSTEM_CODES.has(code);
}
