import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { findOnPath } from "./find-on-path.js";
import { freePorts } from "./free-port.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { withPortRetry } from "./port-retry.js";
import { redisPing } from "./redis-ping.js";
import { redisSpec } from "./redis-server.js";
import { findRedisBinaries } from "./server-binaries.js";
import { type MemberDefinition, type ServerGroup, startServerGroup } from "./server-group.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { waitUntil } from "./wait-until.js";
import { makeSubdir } from "./work-dir.js";

const run = promisify(execFile);

/** Options for {@link startRedisCluster}. */
export interface RedisClusterStartOptions extends LocalStartOptions {
  /** Number of masters (no replicas). Default 3, the fewest Redis Cluster accepts. */
  readonly masters?: number;
}

const HOST = "127.0.0.1";

/**
 * Starts a local Redis Cluster of masters without replicas: `redis-server --cluster-enabled
 * yes` per node (client and bus ports both free loopback ports), then
 * `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`, and waits until every
 * node reports `cluster_state:ok`. The group's URL lists every node:
 * `redis://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`. Not part of the global setup: tests that
 * want a cluster start it privately in `beforeAll` and `stop()` it after.
 *
 * @throws ServerStartError (with log tails) when a node does not come up, or Error when
 *   `redis-cli` is missing or the cluster does not form in time
 */
export async function startRedisCluster(options: RedisClusterStartOptions): Promise<ServerGroup> {
  const { redisServer } = requireBinaries(findRedisBinaries(options.env));
  const redisCli = findRedisCli(redisServer, options.env);
  const count = options.masters ?? 3;
  if (count < 3) throw new RangeError("a Redis Cluster needs at least 3 masters");
  const timeoutMs = options.timeoutMs ?? startTimeoutMs(options.env);
  const group = await withPortRetry(async (attempt) => {
    const ports = await freePorts(count * 2, HOST);
    const members: MemberDefinition[] = [];
    for (let index = 0; index < count; index++) {
      const port = ports[index] as number;
      const busPort = ports[count + index] as number;
      const name = `redis-cluster-${index + 1}`;
      const dir = await makeSubdir(options.dir, attempt === 1 ? name : `${name}-try${attempt}`);
      const dataDir = await makeSubdir(dir, "data");
      members.push({
        name,
        address: `${HOST}:${port}`,
        ports: { client: port, bus: busPort },
        dataDir,
        spec: redisSpec(`redis cluster node ${name}`, redisServer, port, dir, dataDir, [
          "--cluster-enabled",
          "yes",
          "--cluster-port",
          String(busPort),
          "--cluster-config-file",
          join(dataDir, "nodes.conf"),
          "--cluster-node-timeout",
          "2000",
        ]),
        isReady: () => redisPing(HOST, port),
      });
    }
    return startServerGroup({
      kind: "redis",
      what: `redis cluster (${count} masters)`,
      url: `redis://${members.map((m) => m.address).join(",")}`,
      members,
      timeoutMs,
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
  try {
    const addresses = group.members.map((m) => m.address);
    await run(
      redisCli,
      ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"],
      { timeout: timeoutMs },
    );
    await waitUntil("redis cluster state ok on every node", timeoutMs, async () => {
      const states = await Promise.all(
        group.members.map((m) => clusterState(redisCli, m.ports.client as number)),
      );
      return states.every((s) => s === "ok");
    });
  } catch (error) {
    await group.stop().catch(() => undefined);
    throw error;
  }
  return group;
}

function findRedisCli(redisServer: string, env: NodeJS.ProcessEnv | undefined): string {
  const beside = join(dirname(redisServer), "redis-cli");
  if (existsSync(beside)) return beside;
  const found = findOnPath("redis-cli", env);
  if (found === undefined) {
    throw new Error(
      "redis-cli not found (it ships with redis-server: apt-get install redis-server)",
    );
  }
  return found;
}

async function clusterState(redisCli: string, port: number): Promise<string | undefined> {
  try {
    const { stdout } = await run(redisCli, ["-h", HOST, "-p", String(port), "cluster", "info"], {
      timeout: 2_000,
    });
    return /cluster_state:(\w+)/.exec(stdout)?.[1];
  } catch {
    return undefined;
  }
}
