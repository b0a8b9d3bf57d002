import { basename, join } from "node:path";
import { etcdHealthy, etcdIsLeader, etcdSettleBeforeStop } from "./etcd-health.js";
import { freePorts } from "./free-port.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { withPortRetry } from "./port-retry.js";
import { findEtcdBinaries } from "./server-binaries.js";
import { type MemberDefinition, type ServerGroup, startServerGroup } from "./server-group.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";

/** Options for {@link startEtcdCluster}. */
export interface EtcdStartOptions extends LocalStartOptions {
  /** Number of members, 3 by default. */
  readonly members?: number;
}

const HOST = "127.0.0.1";

/**
 * Starts an etcd cluster on free loopback ports (a client and a peer port
 * per member) and waits until every member reports healthy.
 *
 * The URL lists the client ports: `etcd://127.0.0.1:C1,127.0.0.1:C2,...`.
 * Member ports (`client`, `peer`) and data dirs survive `restart(member)`;
 * a restarted member rejoins from its data dir.
 *
 * @throws ServerStartError (with log tails) when the cluster does not form
 */
export async function startEtcdCluster(options: EtcdStartOptions): Promise<ServerGroup> {
  const { etcd } = requireBinaries(findEtcdBinaries(options.env));
  const size = options.members ?? 3;
  return withPortRetry(async (attempt) => {
    const ports = await freePorts(size * 2, HOST);
    const names = Array.from({ length: size }, (_, index) => `e${index + 1}`);
    const clientPort = (index: number): number => ports[index * 2] as number;
    const peerPort = (index: number): number => ports[index * 2 + 1] as number;
    const initialCluster = names
      .map((name, index) => `${name}=http://${HOST}:${peerPort(index)}`)
      .join(",");
    const token = `baton-${basename(options.dir)}-${attempt}-${process.pid}`;
    const members: MemberDefinition[] = [];
    for (const [index, name] of names.entries()) {
      const dir = await makeSubdir(options.dir, attempt === 1 ? name : `${name}-try${attempt}`);
      const dataDir = join(dir, "data");
      const client = clientPort(index);
      const peer = peerPort(index);
      members.push({
        name,
        address: `${HOST}:${client}`,
        ports: { client, peer },
        dataDir,
        spec: {
          name: `etcd member ${name}`,
          command: etcd,
          args: [
            `--name=${name}`,
            `--data-dir=${dataDir}`,
            `--listen-client-urls=http://${HOST}:${client}`,
            `--advertise-client-urls=http://${HOST}:${client}`,
            `--listen-peer-urls=http://${HOST}:${peer}`,
            `--initial-advertise-peer-urls=http://${HOST}:${peer}`,
            `--initial-cluster=${initialCluster}`,
            "--initial-cluster-state=new",
            `--initial-cluster-token=${token}`,
            "--logger=zap",
            "--log-level=warn",
            "--log-outputs=stderr",
          ],
          cwd: dir,
          logFile: join(dir, "server.log"),
          programs: ["etcd"],
        },
        isReady: () => etcdHealthy(HOST, client),
        isLeader: () => etcdIsLeader(HOST, client),
        settleBeforeStop: (runningPeers) => etcdSettleBeforeStop(HOST, client, runningPeers),
      });
    }
    return startServerGroup({
      kind: "etcd",
      what: `etcd cluster (${size} members)`,
      url: `etcd://${members.map((member) => member.address).join(",")}`,
      members,
      timeoutMs: options.timeoutMs ?? startTimeoutMs(options.env),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}
