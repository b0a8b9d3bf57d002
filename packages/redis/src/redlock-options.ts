import type { BackendUrl } from "@baton/core";
import { ConfigError } from "@baton/core";
import { isLegacyNodeRedis, isNodeRedis, LEGACY_MODE_REFUSED } from "./node-redis-client.js";
import type { NodeRedisClientLike, RedisClientLike } from "./redis-client-like.js";
import { checkPrefix, checkQuery, checkTimeout, DEFAULT_KEY_PREFIX } from "./redis-options.js";

/**
 * Options of {@link RedlockBackend}. Exactly one of `url` and `clients`. `C` is the type of
 * your own clients, when you pass them.
 */
export interface RedlockBackendOptions<
  C extends RedisClientLike | NodeRedisClientLike = RedisClientLike | NodeRedisClientLike,
> {
  /**
   * `redlock://[user:pass@]h1:p1,h2:p2,h3:p3` with an odd number (3 or more) of independent
   * Redis nodes (not replicas of each other, not a Cluster). Query parameters `prefix`,
   * `nodeTimeoutMs`, `retryMinMs`, `retryMaxMs` set the options below.
   */
  readonly url?: string;
  /**
   * Your own clients, one per independent node (odd, 3 or more): ioredis `Redis` instances
   * (see {@link RedisClientLike}) or node-redis clients (see {@link NodeRedisClientLike}).
   * Never closed by the backend.
   */
  readonly clients?: readonly C[];
  /** Prefix of every key. Default `"baton:"`. */
  readonly keyPrefix?: string;
  /**
   * How long one node may take to answer in an acquire, renewal or release round before it
   * counts as failed. Keep it small next to the TTL. Default: a tenth of the TTL, at least
   * 50 ms and at most 500 ms.
   */
  readonly nodeTimeoutMs?: number;
  /**
   * Shortest delay before a waiting acquire tries again; each delay is drawn uniformly
   * between `retryMinMs` and `retryMaxMs`, so contenders that failed together spread out.
   * Default {@link DEFAULT_RETRY_MIN_MS}.
   */
  readonly retryMinMs?: number;
  /**
   * Longest delay before a waiting acquire tries again. Default {@link DEFAULT_RETRY_MAX_MS},
   * or `retryMinMs` when that is larger.
   */
  readonly retryMaxMs?: number;
}

/** Default shortest delay before a waiting Redlock acquire tries again. */
export const DEFAULT_RETRY_MIN_MS = 10;
/** Default longest delay before a waiting Redlock acquire tries again. */
export const DEFAULT_RETRY_MAX_MS = 60;

/** Validated {@link RedlockBackendOptions}. */
export interface ResolvedRedlockOptions {
  readonly url: BackendUrl | undefined;
  readonly clients: readonly (RedisClientLike | NodeRedisClientLike)[] | undefined;
  readonly nodeCount: number;
  readonly keyPrefix: string;
  readonly nodeTimeoutMs: number | undefined;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
}

const KEYS = ["url", "clients", "keyPrefix", "nodeTimeoutMs", "retryMinMs", "retryMaxMs"] as const;

/** Query parameters of a `redlock://` URL. */
const URL_PARAMS = ["prefix", "nodeTimeoutMs", "retryMinMs", "retryMaxMs"] as const;

/**
 * Options from `redlock://[user:pass@]h1:p1,h2:p2,h3:p3` (an odd number of independent
 * nodes, 3 or more), with `?prefix=`, `?nodeTimeoutMs=`, `?retryMinMs=`, `?retryMaxMs=`. No
 * I/O; throws `ConfigError` on anything it does not know. The credentials and nodes stay in
 * `url`.
 */
export function redlockOptionsFromUrl(url: BackendUrl): RedlockBackendOptions {
  if (url.scheme !== "redlock") {
    throw new ConfigError("url", `must start with redlock://, got "${url.scheme}:"`);
  }
  if (url.pathname !== "" && url.pathname !== "/") {
    throw new ConfigError("url", "a redlock:// URL takes no path");
  }
  const query = checkQuery(url, URL_PARAMS);
  const seen = new Set<string>();
  for (const h of url.hosts) {
    const id = `${h.host}:${h.port ?? 6379}`;
    if (seen.has(id)) throw new ConfigError("url", `names node ${id} twice`);
    seen.add(id);
  }
  checkNodeCount(url.hosts.length, "url");
  const num = (name: string) => {
    const text = query.get(name);
    return text === null ? undefined : Number(text);
  };
  const prefix = query.get("prefix");
  const nodeTimeoutMs = num("nodeTimeoutMs");
  const retry = checkRetry(num("retryMinMs"), num("retryMaxMs"));
  return {
    url: url.href,
    ...(prefix === null ? {} : { keyPrefix: checkPrefix(prefix) }),
    ...(nodeTimeoutMs === undefined
      ? {}
      : { nodeTimeoutMs: checkTimeout(nodeTimeoutMs, "nodeTimeoutMs") }),
    ...(query.has("retryMinMs") ? { retryMinMs: retry.min } : {}),
    ...(query.has("retryMaxMs") ? { retryMaxMs: retry.max } : {}),
  };
}

/** Checks every option before any I/O; throws `ConfigError` naming the field. */
export function resolveRedlockOptions(
  input: RedlockBackendOptions,
  parseUrl: (url: string) => BackendUrl,
): ResolvedRedlockOptions {
  if (input === null || typeof input !== "object") {
    throw new ConfigError("options", "pass { url } or { clients }");
  }
  for (const key of Object.keys(input)) {
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new ConfigError(`options.${key}`, `unknown option; allowed: ${KEYS.join(", ")}`);
    }
  }
  if ((input.url === undefined) === (input.clients === undefined)) {
    throw new ConfigError(
      "url",
      "pass exactly one of `url` and `clients` (ioredis or node-redis clients)",
    );
  }
  let url: BackendUrl | undefined;
  let nodeCount: number;
  let keyPrefix: unknown = input.keyPrefix;
  let nodeTimeoutMs: unknown = input.nodeTimeoutMs;
  let retryMinMs: unknown = input.retryMinMs;
  let retryMaxMs: unknown = input.retryMaxMs;
  if (input.url !== undefined) {
    url = parseUrl(input.url);
    // Options given beside the URL win over its query.
    const fromUrl = redlockOptionsFromUrl(url);
    keyPrefix ??= fromUrl.keyPrefix;
    nodeTimeoutMs ??= fromUrl.nodeTimeoutMs;
    retryMinMs ??= fromUrl.retryMinMs;
    retryMaxMs ??= fromUrl.retryMaxMs;
    nodeCount = url.hosts.length;
  } else {
    const what = "must be an array of ioredis Redis instances or node-redis clients";
    if (!Array.isArray(input.clients)) throw new ConfigError("clients", what);
    for (const c of input.clients) {
      if (isLegacyNodeRedis(c)) throw new ConfigError("clients", `one ${LEGACY_MODE_REFUSED}`);
      if (isNodeRedis(c)) continue;
      if (
        c === null ||
        typeof c !== "object" ||
        typeof (c as Partial<RedisClientLike>).evalsha !== "function"
      ) {
        throw new ConfigError("clients", what);
      }
    }
    nodeCount = input.clients.length;
    checkNodeCount(nodeCount, "clients");
  }
  const { min, max } = checkRetry(retryMinMs, retryMaxMs);
  return {
    url,
    clients: input.clients,
    nodeCount,
    keyPrefix: checkPrefix(keyPrefix ?? DEFAULT_KEY_PREFIX),
    nodeTimeoutMs:
      nodeTimeoutMs === undefined ? undefined : checkTimeout(nodeTimeoutMs, "nodeTimeoutMs"),
    retryMinMs: min,
    retryMaxMs: max,
  };
}

/** Redlock needs an odd number of independent nodes, 3 or more. */
function checkNodeCount(count: number, field: "url" | "clients"): void {
  if (count < 3 || count % 2 === 0) {
    throw new ConfigError(
      field,
      `Redlock needs an odd number of independent nodes, 3 or more (got ${count})`,
    );
  }
}

/** The retry delay bounds, with their defaults: `min <= max`. */
function checkRetry(minMs: unknown, maxMs: unknown): { min: number; max: number } {
  const min = minMs === undefined ? DEFAULT_RETRY_MIN_MS : checkTimeout(minMs, "retryMinMs");
  const max =
    maxMs === undefined ? Math.max(DEFAULT_RETRY_MAX_MS, min) : checkTimeout(maxMs, "retryMaxMs");
  if (max < min) throw new ConfigError("retryMaxMs", `must be at least retryMinMs (${min})`);
  return { min, max };
}

/** The default per-node timeout for a TTL: a tenth of it, within 50..500 ms. */
export function defaultNodeTimeoutMs(ttlMs: number): number {
  return Math.min(500, Math.max(50, Math.floor(ttlMs / 10)));
}
