import type { BackendUrl } from "@baton/core";
import { ConfigError } from "@baton/core";
import type { Redis } from "ioredis";
import { checkPrefix, checkQuery, checkTimeout, DEFAULT_KEY_PREFIX } from "./redis-options.js";

/** Options of {@link RedlockBackend}. Exactly one of `url` and `clients`. */
export interface RedlockBackendOptions {
  /**
   * `redlock://[user:pass@]h1:p1,h2:p2,h3:p3` with an odd number (3 or more) of independent
   * Redis nodes (not replicas of each other, not a Cluster). Query parameters `prefix`,
   * `nodeTimeoutMs`, `retryMinMs`, `retryMaxMs` set the options below.
   */
  readonly url?: string;
  /** Your own ioredis clients, one per independent node (odd, 3 or more). Never closed by the backend. */
  readonly clients?: readonly Redis[];
  /** Prefix of every key. Default `"baton:"`. */
  readonly keyPrefix?: string;
  /**
   * How long one node may take to answer in an acquire, renewal or release round before it
   * counts as failed. Keep it small next to the TTL. Default: a tenth of the TTL, at least
   * 50 ms and at most 500 ms.
   */
  readonly nodeTimeoutMs?: number;
  /** Shortest random delay before a waiting acquire tries again. Default 10. */
  readonly retryMinMs?: number;
  /** Longest random delay before a waiting acquire tries again. Default 60. */
  readonly retryMaxMs?: number;
}

/** Validated {@link RedlockBackendOptions}. */
export interface ResolvedRedlockOptions {
  readonly url: BackendUrl | undefined;
  readonly clients: readonly Redis[] | undefined;
  readonly nodeCount: number;
  readonly keyPrefix: string;
  readonly nodeTimeoutMs: number | undefined;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
}

const KEYS = ["url", "clients", "keyPrefix", "nodeTimeoutMs", "retryMinMs", "retryMaxMs"] as const;

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
    throw new ConfigError("url", "pass exactly one of `url` and `clients` (ioredis instances)");
  }
  let url: BackendUrl | undefined;
  let nodeCount: number;
  let keyPrefix: unknown = input.keyPrefix;
  let nodeTimeoutMs: unknown = input.nodeTimeoutMs;
  let retryMinMs: unknown = input.retryMinMs;
  let retryMaxMs: unknown = input.retryMaxMs;
  if (input.url !== undefined) {
    url = parseUrl(input.url);
    if (url.scheme !== "redlock") {
      throw new ConfigError("url", `must start with redlock://, got "${url.scheme}:"`);
    }
    if (url.pathname !== "" && url.pathname !== "/") {
      throw new ConfigError("url", "a redlock:// URL takes no path");
    }
    const query = checkQuery(url, ["prefix", "nodeTimeoutMs", "retryMinMs", "retryMaxMs"]);
    const num = (name: string) => {
      const text = query.get(name);
      return text === null ? undefined : Number(text);
    };
    keyPrefix ??= query.get("prefix") ?? undefined;
    nodeTimeoutMs ??= num("nodeTimeoutMs");
    retryMinMs ??= num("retryMinMs");
    retryMaxMs ??= num("retryMaxMs");
    nodeCount = url.hosts.length;
    const seen = new Set<string>();
    for (const h of url.hosts) {
      const id = `${h.host}:${h.port ?? 6379}`;
      if (seen.has(id)) throw new ConfigError("url", `names node ${id} twice`);
      seen.add(id);
    }
  } else {
    if (!Array.isArray(input.clients)) {
      throw new ConfigError("clients", "must be an array of ioredis Redis instances");
    }
    for (const c of input.clients) {
      if (c === null || typeof c !== "object" || typeof (c as Redis).evalsha !== "function") {
        throw new ConfigError("clients", "must be an array of ioredis Redis instances");
      }
    }
    nodeCount = input.clients.length;
  }
  if (nodeCount < 3 || nodeCount % 2 === 0) {
    throw new ConfigError(
      input.url === undefined ? "clients" : "url",
      `Redlock needs an odd number of independent nodes, 3 or more (got ${nodeCount})`,
    );
  }
  const min = retryMinMs === undefined ? 10 : checkTimeout(retryMinMs, "retryMinMs");
  const max = retryMaxMs === undefined ? Math.max(60, min) : checkTimeout(retryMaxMs, "retryMaxMs");
  if (max < min) throw new ConfigError("retryMaxMs", `must be at least retryMinMs (${min})`);
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

/** The default per-node timeout for a TTL: a tenth of it, within 50..500 ms. */
export function defaultNodeTimeoutMs(ttlMs: number): number {
  return Math.min(500, Math.max(50, Math.floor(ttlMs / 10)));
}
