import type { Redis } from "ioredis";
import { isCluster, type RedisClient } from "./redis-client.js";

/** One node a listing walks with SCAN: a Redis node, or one master of a Cluster. */
export interface ScanTarget {
  /** `host:port` of a Cluster's master (what orders them); `""` for a single node. */
  readonly address: string;
  /** `SCAN cursor MATCH pattern COUNT count` on this node: the next cursor and the keys. */
  scan(cursor: string, pattern: string, count: number): Promise<[string, string[]]>;
}

/** A client that lists its own scan targets (the node-redis wrapper). */
interface ListsScanTargets {
  scanTargets(): Promise<ScanTarget[]>;
}

/**
 * The nodes a listing walks: the node itself, or every master of a Cluster in address order
 * (a listing's cursor names a master by its place in that order).
 */
export async function scanTargets(client: RedisClient, cluster: boolean): Promise<ScanTarget[]> {
  const own = client as unknown as Partial<ListsScanTargets>;
  if (typeof own.scanTargets === "function") return await own.scanTargets();
  if (!cluster || !isCluster(client)) return [redisTarget("", client as Redis)];
  return client
    .nodes("master")
    .map((node) => redisTarget(`${node.options.host}:${node.options.port}`, node))
    .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

function redisTarget(address: string, node: Redis): ScanTarget {
  return {
    address,
    scan: (cursor, pattern, count) => node.scan(cursor, "MATCH", pattern, "COUNT", count),
  };
}
