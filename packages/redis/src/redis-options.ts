import type { BackendUrl } from "@baton/core";
import { ConfigError } from "@baton/core";
import { checkNatMap, type RedisNatMap } from "./nat-map.js";
import { isLegacyNodeRedis, isNodeRedis, LEGACY_MODE_REFUSED } from "./node-redis-client.js";
import type { NodeRedisClientLike, RedisClientLike } from "./redis-client-like.js";

/**
 * Options of {@link RedisBackend}. Exactly one of `url` and `client`. `C` is the type of your
 * own client, when you pass one.
 */
export interface RedisBackendOptions<
  C extends RedisClientLike | NodeRedisClientLike = RedisClientLike | NodeRedisClientLike,
> {
  /**
   * `redis://[user:pass@]host:port[/db]` or `rediss://` (TLS). Several hosts
   * (`redis://h1:7000,h2:7001`) or `?cluster=true` connect to a Redis Cluster. Query
   * parameters `prefix` and `commandTimeoutMs` set the options below.
   */
  readonly url?: string;
  /**
   * Your own client: an ioredis `Redis` or `Cluster` instance (see {@link RedisClientLike}),
   * or a node-redis client or cluster of the `redis` package, 4 to 6 (see
   * {@link NodeRedisClientLike}). The backend never closes it; it makes one duplicate
   * connection for its release subscriber, and closes that one on `close()`. Prefer
   * `autoResendUnfulfilledCommands: false` on an ioredis client and `disableOfflineQueue: true`
   * on a node-redis one, so a command sent before a disconnect is not run after the backend
   * gave up on it.
   */
  readonly client?: C;
  /** Prefix of every key and channel. Default `"baton:"`. */
  readonly keyPrefix?: string;
  /**
   * Longest wait for any one Redis call before it counts as unavailable. Renewals are bounded
   * by half the TTL too. Default 2000.
   */
  readonly commandTimeoutMs?: number;
  /**
   * A Redis Cluster whose nodes announce addresses this process cannot reach (Docker or
   * Kubernetes port mappings, NAT, a proxy per node): where to connect instead of each
   * announced `host:port`. The URL's hosts are connected to as written; every node found
   * through them (`CLUSTER SLOTS`, `MOVED`, `ASK`) through this map. Only with a cluster
   * `url`; on your own `client`, set ioredis' `natMap` there.
   */
  readonly natMap?: RedisNatMap;
}

/** Validated {@link RedisBackendOptions}. */
export interface ResolvedRedisOptions {
  readonly url: BackendUrl | undefined;
  readonly client: RedisClientLike | NodeRedisClientLike | undefined;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly cluster: boolean;
  readonly natMap: RedisNatMap | undefined;
}

/** Default key prefix. */
export const DEFAULT_KEY_PREFIX = "baton:";
/** Default bound on one Redis call. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 2_000;

const KEYS = ["url", "client", "keyPrefix", "commandTimeoutMs", "natMap"] as const;

/** Query parameters of a `redis://` URL. */
const URL_PARAMS = ["prefix", "commandTimeoutMs", "cluster"] as const;

/**
 * Options from `redis://[user:pass@]host:port[/db]`, `rediss://` (TLS), or a Redis Cluster
 * (`redis://h1:7000,h2:7001`, or one host and `?cluster=true`), with `?prefix=` and
 * `?commandTimeoutMs=`. No I/O; throws `ConfigError` on anything it does not know. The
 * credentials, hosts and database stay in `url`.
 */
export function redisOptionsFromUrl(url: BackendUrl): RedisBackendOptions {
  if (url.scheme !== "redis" && url.scheme !== "rediss") {
    throw new ConfigError("url", `must start with redis:// or rediss://, got "${url.scheme}:"`);
  }
  if (url.hosts.length === 0) throw new ConfigError("url", "names no host");
  const query = checkQuery(url, URL_PARAMS);
  const cluster = isClusterUrl(url);
  if (!cluster && url.pathname !== "" && url.pathname !== "/") checkDb(url.pathname);
  if (cluster && url.pathname !== "" && url.pathname !== "/") {
    throw new ConfigError("url", "a Redis Cluster has no database number; drop the /db path");
  }
  const prefix = query.get("prefix");
  const timeoutText = query.get("commandTimeoutMs");
  return {
    url: url.href,
    ...(prefix === null ? {} : { keyPrefix: checkPrefix(prefix) }),
    ...(timeoutText === null ? {} : { commandTimeoutMs: checkTimeout(Number(timeoutText)) }),
  };
}

/** Whether a `redis://` URL names a Cluster: several hosts, or `?cluster=true`. */
function isClusterUrl(url: BackendUrl): boolean {
  const clusterText = url.searchParams.get("cluster");
  if (clusterText !== null && clusterText !== "true" && clusterText !== "false") {
    throw new ConfigError("url", `?cluster must be true or false, got "${clusterText}"`);
  }
  return url.hosts.length > 1 || clusterText === "true";
}

/** Checks every option before any I/O; throws `ConfigError` naming the field. */
export function resolveRedisOptions(
  input: RedisBackendOptions,
  parseUrl: (url: string) => BackendUrl,
): ResolvedRedisOptions {
  if (input === null || typeof input !== "object") {
    throw new ConfigError("options", "pass { url } or { client }");
  }
  for (const key of Object.keys(input)) {
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new ConfigError(`options.${key}`, `unknown option; allowed: ${KEYS.join(", ")}`);
    }
  }
  if ((input.url === undefined) === (input.client === undefined)) {
    throw new ConfigError(
      "url",
      "pass exactly one of `url` and `client` (an ioredis or node-redis client)",
    );
  }
  let url: BackendUrl | undefined;
  let keyPrefix = input.keyPrefix;
  let commandTimeoutMs = input.commandTimeoutMs;
  let cluster = false;
  if (input.url !== undefined) {
    url = parseUrl(input.url);
    // Options given beside the URL win over its query.
    const fromUrl = redisOptionsFromUrl(url);
    keyPrefix ??= fromUrl.keyPrefix;
    commandTimeoutMs ??= fromUrl.commandTimeoutMs;
    cluster = isClusterUrl(url);
  } else {
    const c = input.client as Partial<RedisClientLike> | null;
    if (isLegacyNodeRedis(c)) throw new ConfigError("client", LEGACY_MODE_REFUSED);
    const nodeRedis = isNodeRedis(c);
    if (!nodeRedis && (c === null || typeof c !== "object" || typeof c.evalsha !== "function")) {
      throw new ConfigError(
        "client",
        "must be an ioredis Redis or Cluster instance, or a node-redis client or cluster",
      );
    }
    cluster = nodeRedis
      ? typeof (c as { getSlotRandomNode?: unknown }).getSlotRandomNode === "function"
      : (input.client as { isCluster?: boolean }).isCluster === true;
  }
  let natMap: RedisNatMap | undefined;
  if (input.natMap !== undefined) {
    if (input.client !== undefined) {
      throw new ConfigError(
        "natMap",
        "applies to the client the backend builds from `url`; set ioredis' natMap (node-redis: nodeAddressMap) on your own Cluster instead",
      );
    }
    if (!cluster) {
      throw new ConfigError(
        "natMap",
        "applies to a Redis Cluster only: list several hosts in the URL or add ?cluster=true",
      );
    }
    natMap = checkNatMap(input.natMap);
  }
  return {
    url,
    client: input.client,
    keyPrefix: checkPrefix(keyPrefix ?? DEFAULT_KEY_PREFIX),
    commandTimeoutMs: checkTimeout(commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS),
    cluster,
    natMap,
  };
}

/** Checks that a URL's query has only `allowed` parameters. */
export function checkQuery(url: BackendUrl, allowed: readonly string[]): URLSearchParams {
  for (const key of url.searchParams.keys()) {
    if (!allowed.includes(key)) {
      throw new ConfigError(
        "url",
        `unknown query parameter "${key}"; allowed: ${allowed.join(", ")}`,
      );
    }
  }
  return url.searchParams;
}

/** The database number of a `/db` path. */
export function checkDb(pathname: string): number {
  const text = pathname.replace(/^\//, "");
  const db = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(db)) {
    throw new ConfigError(
      "url",
      `the path must be a database number such as /0, got "${pathname}"`,
    );
  }
  return db;
}

/** Checks a key prefix: a string of at most 128 characters without control characters. */
export function checkPrefix(value: unknown): string {
  if (typeof value !== "string") throw new ConfigError("keyPrefix", "must be a string");
  if (value.length > 128) throw new ConfigError("keyPrefix", "must be at most 128 characters");
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we reject
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw new ConfigError("keyPrefix", "must not contain control characters");
  }
  if (/[{}]/.test(value)) {
    throw new ConfigError(
      "keyPrefix",
      "must not contain { or }: the lock name is the hash tag that keeps each lock's keys in one cluster slot",
    );
  }
  return value;
}

/** Checks a per-call timeout in ms (1 to 600000). */
export function checkTimeout(value: unknown, field = "commandTimeoutMs"): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > 600_000) {
    throw new ConfigError(
      field,
      `must be an integer between 1 and 600000 (ms), got ${String(value)}`,
    );
  }
  return value;
}
