import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseBackendUrl } from "@baton/core";
import { UsageError } from "./usage-error.js";

/**
 * The adapter packages the CLI ships with, by URL scheme. Each import names its package
 * literally, so a bundler sees every adapter and an installed CLI reaches these backends.
 */
const ADAPTERS: Readonly<Record<string, () => Promise<unknown>>> = {
  redis: () => import("@baton/redis"),
  rediss: () => import("@baton/redis"),
  redlock: () => import("@baton/redis"),
  etcd: () => import("@baton/etcd"),
  zookeeper: () => import("@baton/zookeeper"),
  mysql: () => import("@baton/mysql"),
  mariadb: () => import("@baton/mysql"),
  postgres: () => import("@baton/postgres"),
  postgresql: () => import("@baton/postgres"),
};

/**
 * The adapters installed apart from the CLI (optional peer dependencies), by URL scheme: each
 * brings a cloud SDK of tens of megabytes that most users of the CLI never load.
 */
const OPTIONAL_ADAPTERS: Readonly<
  Record<string, { readonly name: string; readonly load: () => Promise<unknown> }>
> = {
  dynamodb: { name: "@baton/dynamodb", load: () => import("@baton/dynamodb") },
  azblob: { name: "@baton/azure-blob", load: () => import("@baton/azure-blob") },
};

/** Loads (and so registers) the adapter that serves `url`'s scheme; memory needs none. */
export async function loadAdapter(url: string): Promise<void> {
  const scheme = parseBackendUrl(url).scheme;
  const optional = OPTIONAL_ADAPTERS[scheme];
  if (optional === undefined) {
    await ADAPTERS[scheme]?.();
    return;
  }
  await loadOptionalAdapter(scheme, optional);
}

/**
 * Loads an adapter installed apart from the CLI; when it is not installed, throws a
 * `UsageError` that names it and gives the one command that installs it.
 */
export async function loadOptionalAdapter(
  scheme: string,
  adapter: { readonly name: string; readonly load: () => Promise<unknown> },
): Promise<void> {
  try {
    await adapter.load();
  } catch (error) {
    if (!isMissing(error, adapter.name)) throw error;
    throw new UsageError(
      `the ${scheme}:// backend needs the adapter ${adapter.name}, which is installed apart from the CLI; install it beside the CLI's own @baton/core with:\n  ${installCommand(adapter.name)}`,
    );
  }
}

/** True when `error` says that `name` itself is not installed (not one of its dependencies). */
function isMissing(error: unknown, name: string): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown };
  return (
    (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") &&
    typeof message === "string" &&
    message.includes(`'${name}'`)
  );
}

/**
 * The npm command that installs `name` where the CLI's `@baton/core` is installed: inside a
 * global install of the CLI, or the project that depends on it. An adapter installed anywhere
 * else would register its backend with another copy of `@baton/core` than the CLI's.
 */
export function installCommand(name: string): string {
  const core = fileURLToPath(import.meta.resolve("@baton/core"));
  const installed = /^(.*)[\\/]node_modules[\\/]@baton[\\/]core[\\/]/.exec(core);
  // Inside a clone of the repository (packages/core/src/index.ts): the workspace root.
  const root = installed?.[1] ?? dirname(dirname(dirname(dirname(core))));
  return `npm install --omit=dev --save-prod --prefix ${JSON.stringify(root)} ${name}`;
}
