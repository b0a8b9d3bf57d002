/**
 * Every Baton backend the conformance suite knows, in the order used for
 * defaults and messages.
 */
export const ALL_BACKENDS = [
  "memory",
  "redis",
  "redlock",
  "etcd",
  "zookeeper",
  "postgres",
  "postgres-lease",
  "dynamodb",
  "azure-blob",
  "mysql",
  "mysql-lease",
] as const;

/**
 * The backends an unset `BATON_BACKENDS` selects (what `npm test` runs): all of them. A
 * backend whose suite is still being brought up is left out of this list, and runs when named.
 */
export const DEFAULT_BACKENDS: readonly BackendKind[] = ALL_BACKENDS;

/** A Baton backend name as accepted by `BATON_BACKENDS`. */
export type BackendKind = (typeof ALL_BACKENDS)[number];

/**
 * The backends that need a real server (everything except `memory`).
 * `redis` is one node; `redlock` is five independent nodes; `mysql` and `mysql-lease` share one
 * MariaDB server when both are selected.
 */
export const SERVER_KINDS: readonly Exclude<BackendKind, "memory">[] = ALL_BACKENDS.filter(
  (kind): kind is Exclude<BackendKind, "memory"> => kind !== "memory",
);

/** A backend that is backed by real server processes. */
export type ServerKind = (typeof SERVER_KINDS)[number];

/** True when `value` is one of {@link ALL_BACKENDS}. */
export function isBackendKind(value: string): value is BackendKind {
  return (ALL_BACKENDS as readonly string[]).includes(value);
}

/** True when `kind` needs a real server, i.e. is one of {@link SERVER_KINDS}. */
export function isServerKind(kind: string): kind is ServerKind {
  return (SERVER_KINDS as readonly string[]).includes(kind);
}
