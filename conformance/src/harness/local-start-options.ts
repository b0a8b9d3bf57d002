import type { BinaryLookup } from "./server-binaries.js";

/** Options shared by the functions that start one kind of local server. */
export interface LocalStartOptions {
  /** Directory for the group's data and logs; created if missing. */
  readonly dir: string;
  /** Time allowed to become ready (default: `BATON_SERVER_START_TIMEOUT_MS` or 30 s). */
  readonly timeoutMs?: number;
  /** Time between the polite stop signal and SIGKILL (default 10 s). */
  readonly graceMs?: number;
  /** Environment for binary lookups (`BATON_REDIS_SERVER`, ...); `process.env` by default. */
  readonly env?: NodeJS.ProcessEnv;
  /** More PostgreSQL server settings (`name=value`, as for `postgres -c`), after the harness's own. */
  readonly postgresSettings?: readonly string[];
}

/**
 * Unwraps a binary lookup.
 *
 * @throws Error with the lookup's reason when the binaries are missing
 */
export function requireBinaries<T>(lookup: BinaryLookup<T>): T {
  if (!lookup.ok) {
    throw new Error(lookup.reason);
  }
  return lookup.value;
}
