/** The environment variable that picks how servers are provided. */
export const PROVIDER_ENV = "BATON_SERVER_PROVIDER";

/** Every server provider, default first. */
export const SERVER_PROVIDERS = ["local", "testcontainers"] as const;

/**
 * Where the servers come from:
 * - `local` (default): server binaries installed locally, started
 *   on free loopback ports (`scripts/install-servers.sh` installs them);
 * - `testcontainers`: containers through the optional `testcontainers`
 *   package and a Docker-compatible engine.
 */
export type ServerProviderName = (typeof SERVER_PROVIDERS)[number];

/**
 * The provider selected by `BATON_SERVER_PROVIDER` (default `local`).
 *
 * @throws Error naming the allowed values when the variable is unknown
 */
export function selectedProvider(env: NodeJS.ProcessEnv = process.env): ServerProviderName {
  const value = (env[PROVIDER_ENV] ?? "").trim().toLowerCase();
  if (value === "") {
    return "local";
  }
  if ((SERVER_PROVIDERS as readonly string[]).includes(value)) {
    return value as ServerProviderName;
  }
  throw new Error(
    `${PROVIDER_ENV}: unknown provider ${JSON.stringify(value)}; allowed values: ${SERVER_PROVIDERS.join(", ")}`,
  );
}
