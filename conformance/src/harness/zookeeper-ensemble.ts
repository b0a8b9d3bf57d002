import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePorts } from "./free-port.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { withPortRetry } from "./port-retry.js";
import { findZookeeperBinaries } from "./server-binaries.js";
import { type MemberDefinition, type ServerGroup, startServerGroup } from "./server-group.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";
import { zookeeperServing } from "./zookeeper-srvr.js";

/** Options for {@link startZookeeperEnsemble}. */
export interface ZookeeperStartOptions extends LocalStartOptions {
  /** Number of nodes, 3 by default (1 runs standalone). */
  readonly nodes?: number;
}

const HOST = "127.0.0.1";

/** zoo.cfg lines shared by every node. Short ticks keep session tests fast. */
const COMMON_CONFIG = [
  "tickTime=500",
  "initLimit=20",
  "syncLimit=10",
  "minSessionTimeout=1000",
  "maxSessionTimeout=60000",
  "admin.enableServer=false",
  "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
  `clientPortAddress=${HOST}`,
  "forceSync=no",
  "preAllocSize=4096",
  "autopurge.purgeInterval=0",
];

/**
 * Starts a ZooKeeper ensemble with plain `java ... QuorumPeerMain zoo.cfg`
 * on free loopback ports (client, quorum and election port per node) and
 * waits until every node reports `Mode: leader` or `follower` via `srvr`.
 *
 * The URL lists the client ports: `zookeeper://127.0.0.1:P1,127.0.0.1:P2,...`.
 *
 * @throws ServerStartError (with log tails) when the ensemble does not form
 */
export async function startZookeeperEnsemble(options: ZookeeperStartOptions): Promise<ServerGroup> {
  const { java, classpath } = requireBinaries(findZookeeperBinaries(options.env));
  const size = options.nodes ?? 3;
  return withPortRetry(async (attempt) => {
    const ports = await freePorts(size * 3, HOST);
    const port = (index: number, role: number): number => ports[index * 3 + role] as number;
    const serverLines =
      size === 1
        ? []
        : Array.from(
            { length: size },
            (_, index) => `server.${index + 1}=${HOST}:${port(index, 1)}:${port(index, 2)}`,
          );
    const members: MemberDefinition[] = [];
    for (let index = 0; index < size; index += 1) {
      const name = `zk${index + 1}`;
      const dir = await makeSubdir(options.dir, attempt === 1 ? name : `${name}-try${attempt}`);
      const dataDir = await makeSubdir(dir, "data");
      const client = port(index, 0);
      const configFile = join(dir, "zoo.cfg");
      await writeFile(
        configFile,
        [...COMMON_CONFIG, `dataDir=${dataDir}`, `clientPort=${client}`, ...serverLines, ""].join(
          "\n",
        ),
      );
      if (size > 1) {
        await writeFile(join(dataDir, "myid"), `${index + 1}\n`);
      }
      members.push({
        name,
        address: `${HOST}:${client}`,
        ports: { client, quorum: port(index, 1), election: port(index, 2) },
        dataDir,
        spec: {
          name: `zookeeper node ${name}`,
          command: java,
          args: [
            "-Xms32m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            // The leader deletes emptied container nodes (the parents Curator creates) every
            // second instead of every minute, so tests see what a real ensemble does later.
            "-Dznode.container.checkIntervalMs=1000",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            configFile,
          ],
          cwd: dir,
          logFile: join(dir, "server.log"),
          programs: ["java"],
        },
        isReady: () => zookeeperServing(HOST, client),
      });
    }
    return startServerGroup({
      kind: "zookeeper",
      what: `zookeeper ensemble (${size} nodes)`,
      url: `zookeeper://${members.map((member) => member.address).join(",")}`,
      members,
      timeoutMs: options.timeoutMs ?? startTimeoutMs(options.env),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}
