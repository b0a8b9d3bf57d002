import { join } from "node:path";
import { freePorts } from "./free-port.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import type { ProcessSpec } from "./managed-process.js";
import { withPortRetry } from "./port-retry.js";
import { redisPing } from "./redis-ping.js";
import { findRedisBinaries } from "./server-binaries.js";
import { type MemberDefinition, type ServerGroup, startServerGroup } from "./server-group.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";

/** Options for {@link startRedisNodes}. */
export interface RedisStartOptions extends LocalStartOptions {
  /**
   * `redis`: one node, URL `redis://127.0.0.1:P`;
   * `redlock`: independent nodes, URL `redlock://127.0.0.1:P1,...`.
   */
  readonly kind: "redis" | "redlock";
  /** Number of nodes: 1 for `redis`, 5 for `redlock` by default. */
  readonly count?: number;
}

const HOST = "127.0.0.1";

/**
 * Starts independent Redis nodes on free loopback ports, without
 * persistence, and waits until each answers PING.
 *
 * @throws ServerStartError (with log tails) when a node does not come up
 */
export async function startRedisNodes(options: RedisStartOptions): Promise<ServerGroup> {
  const { redisServer } = requireBinaries(findRedisBinaries(options.env));
  const count = options.count ?? (options.kind === "redis" ? 1 : 5);
  return withPortRetry(async (attempt) => {
    const ports = await freePorts(count, HOST);
    const members: MemberDefinition[] = [];
    for (const [index, port] of ports.entries()) {
      const name = `${options.kind}-${index + 1}`;
      const dir = await makeSubdir(options.dir, attempt === 1 ? name : `${name}-try${attempt}`);
      const dataDir = await makeSubdir(dir, "data");
      members.push({
        name,
        address: `${HOST}:${port}`,
        ports: { client: port },
        dataDir,
        spec: redisSpec(`${options.kind} node ${name}`, redisServer, port, dir, dataDir),
        isReady: () => redisPing(HOST, port),
      });
    }
    const addresses = members.map((member) => member.address);
    const url =
      options.kind === "redis" ? `redis://${addresses[0]}` : `redlock://${addresses.join(",")}`;
    return startServerGroup({
      kind: options.kind,
      what: options.kind === "redis" ? "redis node" : `redlock nodes (${count})`,
      url,
      members,
      timeoutMs: options.timeoutMs ?? startTimeoutMs(options.env),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}

/**
 * How a redis-server runs here: loopback only, no persistence (a restart starts empty), in
 * the foreground, data and log in `dir`. `extra` adds arguments (cluster mode).
 */
export function redisSpec(
  name: string,
  command: string,
  port: number,
  dir: string,
  dataDir: string,
  extra: readonly string[] = [],
): ProcessSpec {
  return {
    name,
    command,
    args: [
      "--bind",
      HOST,
      "--port",
      String(port),
      ...extra,
      "--save",
      "",
      "--appendonly",
      "no",
      "--daemonize",
      "no",
      "--dir",
      dataDir,
    ],
    cwd: dir,
    logFile: join(dir, "server.log"),
    programs: ["redis-server", "redis-check-rdb"],
  };
}
