import { createClient as createClient6, createCluster as createCluster6 } from "redis";
import { createClient as createClient4, createCluster as createCluster4 } from "redis-v4";
import { createClient as createClient5, createCluster as createCluster5 } from "redis-v5";
import { type NodeRedisClientLike, RedisBackend } from "../src/index.js";

/** The node-redis majors the adapter is tested with, and their `createClient`/`createCluster`. */
export const NODE_REDIS = {
  "node-redis 4": { createClient: createClient4, createCluster: createCluster4 },
  "node-redis 5": { createClient: createClient5, createCluster: createCluster5 },
  "node-redis 6": { createClient: createClient6, createCluster: createCluster6 },
} as const;

/** One of {@link NODE_REDIS}' names. */
export type NodeRedisMajor = keyof typeof NODE_REDIS;

/** What a test needs of a node-redis client or cluster beyond what Baton uses. */
export type TestNodeRedis = NodeRedisClientLike & {
  quit?(): Promise<unknown>;
  close?(): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
};

/** Closes an app's node-redis client at once, whatever its major. */
export async function closeNodeRedis(client: TestNodeRedis): Promise<void> {
  if (!client.isOpen) return;
  if (typeof client.destroy === "function") client.destroy();
  else await client.disconnect?.();
}

/**
 * A connected node-redis client of `major` to `host:port` (`redis://` URL form accepted), as
 * an app makes one: an `error` listener, nothing else set unless `options` says.
 */
export async function nodeRedisClient(
  major: NodeRedisMajor,
  url: string,
  options: Record<string, unknown> = {},
): Promise<TestNodeRedis> {
  const create = NODE_REDIS[major].createClient as (o: object) => TestNodeRedis;
  const client = create({ url: url.startsWith("redis://") ? url : `redis://${url}`, ...options });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

/** A connected node-redis cluster client of `major` with `hosts` (`host:port`) as root nodes. */
export async function nodeRedisCluster(
  major: NodeRedisMajor,
  hosts: readonly string[],
  options: Record<string, unknown> = {},
): Promise<TestNodeRedis> {
  const create = NODE_REDIS[major].createCluster as (o: object) => TestNodeRedis;
  const client = create({ rootNodes: hosts.map((h) => ({ url: `redis://${h}` })), ...options });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

/**
 * A backend on an app's own node-redis client that, unlike a plain one, also closes that client
 * when it closes: for the conformance suite, which closes the backends it is given.
 */
export class OwningRedisBackend extends RedisBackend<NodeRedisClientLike> {
  readonly #own: TestNodeRedis;
  constructor(client: TestNodeRedis, options: { keyPrefix?: string } = {}) {
    super({ client, ...options });
    this.#own = client;
  }
  override async close(): Promise<void> {
    await super.close();
    await closeNodeRedis(this.#own);
  }
}
