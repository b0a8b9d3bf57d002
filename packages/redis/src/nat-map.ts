import { ConfigError } from "@baton/core";

/** An address a client connects to: a host name or IP and a TCP port. */
export interface RedisAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Where to reach the nodes of a Redis Cluster whose announced addresses the client cannot
 * reach (Docker or Kubernetes port mappings, NAT, a proxy per node): each key is a
 * `host:port` as the nodes announce it in `CLUSTER SLOTS` and `MOVED`/`ASK` redirects
 * (`10.0.0.5:6379`, or `::1:6379` for IPv6, without brackets), each value the address to
 * connect to instead. Announced addresses not in the map are connected to as announced.
 *
 * @example
 * const natMap: RedisNatMap = {
 *   "172.18.0.2:6379": { host: "127.0.0.1", port: 7001 },
 *   "172.18.0.3:6379": { host: "127.0.0.1", port: 7002 },
 *   "172.18.0.4:6379": { host: "127.0.0.1", port: 7003 },
 * };
 */
export type RedisNatMap = Readonly<Record<string, RedisAddress>>;

/** Most entries a `natMap` may have (Redis Cluster's own recommended node limit). */
const MAX_ENTRIES = 1_000;

/** Checks a `natMap` option; throws `ConfigError` (field `natMap`) naming the bad entry. */
export function checkNatMap(value: unknown): RedisNatMap {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError(
      "natMap",
      'must be an object mapping "host:port" to { host, port }, e.g. { "10.0.0.5:6379": { host: "127.0.0.1", port: 7001 } }',
    );
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) throw new ConfigError("natMap", "must map at least one address");
  if (entries.length > MAX_ENTRIES) {
    throw new ConfigError("natMap", `must have at most ${MAX_ENTRIES} entries`);
  }
  const checked: Record<string, RedisAddress> = {};
  for (const [key, target] of entries) {
    if (key.startsWith("[")) {
      throw new ConfigError("natMap", `write IPv6 keys without brackets, got "${key}"`);
    }
    const colon = key.lastIndexOf(":");
    const portText = key.slice(colon + 1);
    if (
      colon <= 0 ||
      !isHost(key.slice(0, colon)) ||
      !/^\d{1,5}$/.test(portText) ||
      !isPort(Number(portText))
    ) {
      throw new ConfigError(
        "natMap",
        `keys must be "host:port" as the nodes announce them, got "${key}"`,
      );
    }
    checked[key] = checkAddress(target, key);
  }
  return Object.freeze(checked);
}

function checkAddress(value: unknown, key: string): RedisAddress {
  const what = `natMap["${key}"]`;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError("natMap", `${what} must be { host, port }`);
  }
  for (const field of Object.keys(value)) {
    if (field !== "host" && field !== "port") {
      throw new ConfigError("natMap", `${what} has unknown field "${field}"; allowed: host, port`);
    }
  }
  const { host, port } = value as { host?: unknown; port?: unknown };
  if (typeof host !== "string" || !isHost(host)) {
    throw new ConfigError("natMap", `${what}.host must be a non-empty host name or IP`);
  }
  if (!isPort(port)) {
    throw new ConfigError(
      "natMap",
      `${what}.port must be an integer between 1 and 65535, got ${String(port)}`,
    );
  }
  return Object.freeze({ host, port });
}

function isHost(host: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we reject
  return host.length > 0 && host.length <= 255 && !/[\s\u0000-\u001f\u007f/?#@]/.test(host);
}

function isPort(port: unknown): port is number {
  return typeof port === "number" && Number.isInteger(port) && port >= 1 && port <= 65_535;
}
