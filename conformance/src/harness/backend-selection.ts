import { ALL_BACKENDS, type BackendKind, DEFAULT_BACKENDS, isBackendKind } from "./backend-kind.js";

/** The environment variable that selects which backends run. */
export const BACKENDS_ENV = "BATON_BACKENDS";

/**
 * Parses a comma-separated backend list such as `"redis,etcd"`.
 *
 * Names are trimmed and matched case-insensitively; empty items are ignored
 * and duplicates collapse. An unset or blank value selects {@link DEFAULT_BACKENDS}.
 *
 * @param value - the raw list, typically `process.env.BATON_BACKENDS`
 * @returns the selected backends, in {@link ALL_BACKENDS} order
 * @throws Error naming the unknown entries and the allowed values
 */
export function parseBackendList(value: string | undefined): BackendKind[] {
  if (value === undefined || value.trim() === "") {
    return [...DEFAULT_BACKENDS];
  }
  const names = value
    .split(",")
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== "");
  const unknown = names.filter((name) => !isBackendKind(name));
  if (unknown.length > 0) {
    const quoted = unknown.map((name) => JSON.stringify(name)).join(", ");
    throw new Error(
      `${BACKENDS_ENV}: unknown backend ${quoted}; allowed values: ${ALL_BACKENDS.join(", ")}`,
    );
  }
  if (names.length === 0) {
    throw new Error(
      `${BACKENDS_ENV}=${JSON.stringify(value)} names no backend; allowed values: ${ALL_BACKENDS.join(", ")}`,
    );
  }
  return ALL_BACKENDS.filter((kind) => names.includes(kind));
}

/**
 * The backends selected by `BATON_BACKENDS` (default: {@link DEFAULT_BACKENDS}).
 *
 * @param env - the environment to read, `process.env` by default
 * @throws Error when the variable names an unknown backend
 */
export function selectedBackends(env: NodeJS.ProcessEnv = process.env): BackendKind[] {
  return parseBackendList(env[BACKENDS_ENV]);
}
