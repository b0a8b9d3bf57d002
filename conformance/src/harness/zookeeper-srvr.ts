import { tcpExchange } from "./tcp-exchange.js";

/** The role a ZooKeeper node reports in its `srvr` output. */
export type ZookeeperMode = "leader" | "follower" | "observer" | "standalone";

/**
 * Asks a ZooKeeper node for its mode with the `srvr` four-letter word.
 * (`ruok` answers before the quorum serves; `srvr` reports a mode only once
 * the node is part of a working quorum.)
 *
 * @returns the mode, or `undefined` when the node does not serve yet
 */
export async function zookeeperMode(
  host: string,
  port: number,
  timeoutMs = 1000,
): Promise<ZookeeperMode | undefined> {
  try {
    const reply = await tcpExchange(host, port, "srvr", { timeoutMs });
    const match = /^Mode: (leader|follower|observer|standalone)\s*$/m.exec(reply);
    return match?.[1] as ZookeeperMode | undefined;
  } catch {
    return undefined;
  }
}

/** True when the node serves as part of a quorum (leader or follower) or standalone. */
export async function zookeeperServing(
  host: string,
  port: number,
  timeoutMs = 1000,
): Promise<boolean> {
  const mode = await zookeeperMode(host, port, timeoutMs);
  return mode !== undefined && mode !== "observer";
}
