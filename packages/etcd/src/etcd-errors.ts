import {
  AuthenticationError,
  BackendUnavailableError,
  BatonError,
  ConfigError,
  redactUrl,
  SessionLostError,
} from "@baton/core";
import {
  EtcdAuthenticationFailedError,
  EtcdLeaseInvalidError,
  EtcdPermissionDeniedError,
  EtcdRoleNotGrantedError,
} from "etcd3";

/** How a context names the members a call went to, after what was being done. */
const AT_MEMBERS = " (etcd at ";

/**
 * The members a client talks to, for messages: `127.0.0.1:2379, 127.0.0.1:22379`. Read from
 * the etcd3 client's options (also for a client the user built); never with credentials.
 */
export function membersOf(client: object): string {
  const hosts = (client as { options?: { hosts?: unknown } }).options?.hosts;
  const list = typeof hosts === "string" ? [hosts] : Array.isArray(hosts) ? hosts : [];
  const shown = list.filter((h): h is string => typeof h === "string").map((h) => redactUrl(h));
  return shown.length > 0 ? shown.join(", ") : "the hosts of the etcd client";
}

/**
 * The context of an etcd call for {@link toBatonError}: what was being done and the members
 * it went to, `could not acquire "job" (etcd at h1:2379, h2:2379)`.
 */
export function etcdContext(what: string, members: string): string {
  return `${what}${AT_MEMBERS}${members})`;
}

/** What failed last at each set of members: named when the client's circuit breaker opens. */
const lastFailures = new Map<string, string>();

/** A `BackendUnavailableError` for `context` (from {@link etcdContext}) that says what to check. */
export function etcdUnavailable(context: string, cause?: unknown): BackendUnavailableError {
  return new BackendUnavailableError(
    `${context}; check that etcd runs there and is reachable`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Maps an error of the etcd3 client, met while doing `context` (from {@link etcdContext}, so
 * the message names the members), to Baton's named errors: a `BatonError` passes through, a
 * lost lease is a `SessionLostError`, refused credentials an `AuthenticationError` and missing
 * permissions a `ConfigError` (retrying cannot help), anything else a `BackendUnavailableError` (never "held"). When the client
 * holds off after repeated failures (its circuit breaker is open), the message says so and
 * names the last failure seen at those members.
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const detail = grpcDetail(error);
  if (error instanceof EtcdLeaseInvalidError || /lease not found/i.test(detail)) {
    return new SessionLostError(
      `${context}: the etcd lease is gone (${detail}); its locks are lost, the next acquire opens a new one`,
      { cause: error },
    );
  }
  if (error instanceof EtcdAuthenticationFailedError) {
    // Never retried: the same user name and password cannot succeed the next time.
    return new AuthenticationError(
      "password",
      `${context}: etcd refused the credentials (${detail}); check the user name and password`,
      { cause: error },
    );
  }
  if (error instanceof EtcdPermissionDeniedError || error instanceof EtcdRoleNotGrantedError) {
    return new ConfigError(
      "credentials",
      `${context}: etcd refused them (${detail}); check the user name, password and the user's roles`,
      { cause: error },
    );
  }
  const members = context.slice(context.lastIndexOf(AT_MEMBERS));
  if (isBrokenCircuit(error)) {
    const last = lastFailures.get(members);
    const why = `the etcd client holds off for a few seconds after repeated failures (its circuit breaker is open${last === undefined ? "" : `; last failure: ${last}`})`;
    return etcdUnavailable(`${context}: ${why}`, error);
  }
  lastFailures.set(members, detail);
  return etcdUnavailable(`${context}: ${detail}`, error);
}

/** cockatiel's BrokenCircuitError, which etcd3 lets through when a host's breaker is open. */
function isBrokenCircuit(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    (error as { isBrokenCircuitError?: unknown }).isBrokenCircuitError === true
  );
}

/** A gRPC error's message without its status prefix and empty trailers. */
function grpcDetail(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message
    .replace(/^\d+ [A-Z_]+: /, "")
    .replace(/\s*Resolution note:\s*$/, "")
    .replace(/\.$/, "")
    .replace(/^No connection established\. Last error: (?:Error: )?(.*)$/s, "no connection ($1)");
}
