import {
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

/** What a client reached for last, by client: named when its circuit breaker later opens. */
const lastFailures = new WeakMap<object, string>();

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

/** A `BackendUnavailableError` that says what failed, at which members, and what to check. */
export function etcdUnavailable(
  client: object,
  what: string,
  cause?: unknown,
): BackendUnavailableError {
  return new BackendUnavailableError(
    `${what}; etcd at ${membersOf(client)}: check that it runs there and is reachable`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Maps an error of the etcd3 client to Baton's named errors, each naming the members it was
 * sent to: a lost lease is a `SessionLostError`, bad credentials or permissions a
 * `ConfigError` (retrying cannot help), anything else a `BackendUnavailableError` (never
 * "held"). When the client holds off after repeated failures (its circuit breaker is open),
 * the message says so and names the last failure it saw.
 */
export function toBatonError(error: unknown, context: string, client: object): BatonError {
  if (error instanceof BatonError) return error;
  const detail = grpcDetail(error);
  if (error instanceof EtcdLeaseInvalidError || /lease not found/i.test(detail)) {
    return new SessionLostError(
      `${context}: the etcd lease is gone (${detail}; etcd at ${membersOf(client)}); its locks are lost, the next acquire opens a new one`,
      { cause: error },
    );
  }
  if (
    error instanceof EtcdAuthenticationFailedError ||
    error instanceof EtcdPermissionDeniedError ||
    error instanceof EtcdRoleNotGrantedError
  ) {
    return new ConfigError(
      "credentials",
      `${context}: etcd at ${membersOf(client)} refused them (${detail}); check the user name, password and the user's roles`,
      { cause: error },
    );
  }
  if (isBrokenCircuit(error)) {
    const last = lastFailures.get(client);
    const why = `the etcd client holds off for a few seconds after repeated failures (its circuit breaker is open${last === undefined ? "" : `; last failure: ${last}`})`;
    return etcdUnavailable(client, `${context}: ${why}`, error);
  }
  lastFailures.set(client, detail);
  return etcdUnavailable(client, `${context}: ${detail}`, error);
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
