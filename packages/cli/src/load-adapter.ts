import { parseBackendUrl } from "@baton/core";

/**
 * The adapter packages the CLI ships with, by URL scheme. Each import names its package
 * literally, so a bundler sees every adapter and an installed CLI reaches every backend.
 */
const ADAPTERS: Readonly<Record<string, () => Promise<unknown>>> = {
  redis: () => import("@baton/redis"),
  rediss: () => import("@baton/redis"),
  redlock: () => import("@baton/redis"),
  etcd: () => import("@baton/etcd"),
  zookeeper: () => import("@baton/zookeeper"),
  postgres: () => import("@baton/postgres"),
  postgresql: () => import("@baton/postgres"),
  dynamodb: () => import("@baton/dynamodb"),
  azblob: () => import("@baton/azure-blob"),
};

/** Loads (and so registers) the adapter that serves `url`'s scheme; memory needs none. */
export async function loadAdapter(url: string): Promise<void> {
  await ADAPTERS[parseBackendUrl(url).scheme]?.();
}
