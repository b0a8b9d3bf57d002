import type { BackendUrl } from "@baton/core";
import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { RedisNatMap } from "./nat-map.js";
import { checkDb } from "./redis-options.js";

/** A Redis instance or a Redis Cluster: what the backend runs its scripts on. */
export type RedisClient = Redis | Cluster;

/**
 * ioredis options for connections the backend owns: lazy connect, fail fast while
 * disconnected (no offline queue), and never run a command again after a reconnect, since the
 * backend may already have given up on it. Reconnects keep going in the background.
 */
export function ownedClientOptions(url: BackendUrl, timeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    connectTimeout: timeoutMs,
    retryStrategy: (times) => Math.min(50 * times, 1_000),
    ...credentials(url),
    ...(url.scheme === "rediss" ? { tls: {} } : {}),
  };
}

/**
 * The `AUTH` a URL asks for. `user:password@` is an ACL user; a user info without a password
 * (`redis://TOKEN@host`) is a password for the default user, as `redis-cli -u` reads it.
 */
export function credentials(url: BackendUrl): { username?: string; password?: string } {
  if (url.password === "") return url.username === "" ? {} : { password: url.username };
  return url.username === ""
    ? { password: url.password }
    : { username: url.username, password: url.password };
}

/**
 * A client for one node (`redis://host:port/db`) or a Cluster (several hosts), reaching the
 * Cluster's announced addresses through `natMap` when given.
 */
export function clientFromUrl(
  url: BackendUrl,
  cluster: boolean,
  timeoutMs: number,
  natMap?: RedisNatMap,
): RedisClient {
  const common = ownedClientOptions(url, timeoutMs);
  const hosts = url.hosts.map((h) => ({ host: h.host, port: h.port ?? 6379 }));
  let client: RedisClient;
  if (cluster) {
    client = new Cluster(hosts, {
      lazyConnect: true,
      enableOfflineQueue: false,
      // ioredis' own check sends CLUSTER INFO to a random node and, with the offline queue off,
      // fails whenever that node's connection is still opening, which makes a Cluster reached
      // through one of its nodes (or through natMap) reconnect again and again. `whenReady`
      // waits for every master's connection instead.
      enableReadyCheck: false,
      clusterRetryStrategy: (times) => Math.min(100 * times, 2_000),
      redisOptions: { ...common, lazyConnect: false },
      ...(natMap === undefined ? {} : { natMap: { ...natMap } }),
    });
  } else {
    const db = url.pathname === "" || url.pathname === "/" ? 0 : checkDb(url.pathname);
    const first = hosts[0] as { host: string; port: number };
    client = new Redis({ ...common, host: first.host, port: first.port, db });
  }
  // Connection errors surface through the calls that fail; ioredis reconnects.
  client.on("error", () => undefined);
  return client;
}

/** The shared subscriber: queues SUBSCRIBE while (re)connecting, resubscribes after. */
export function duplicateForSubscriber(client: RedisClient): RedisClient {
  const subscriber = isCluster(client)
    ? client.duplicate(undefined, { enableOfflineQueue: true, lazyConnect: false })
    : client.duplicate({
        enableOfflineQueue: true,
        lazyConnect: false,
        autoResubscribe: true,
        maxRetriesPerRequest: null,
      });
  subscriber.on("error", () => undefined);
  return subscriber;
}

/** Whether `client` is a Cluster, by shape (an app's own copy of ioredis passes too). */
export function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}
