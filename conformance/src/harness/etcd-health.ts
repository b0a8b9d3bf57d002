import { httpGet } from "./http-get.js";

/**
 * Asks an etcd member's `/health` endpoint whether it is healthy. A member
 * reports healthy only when the cluster has a leader and it can serve a
 * linearizable read (what `etcdctl endpoint health` checks).
 *
 * @param host - the member's client address
 * @param clientPort - the member's client port
 * @returns true on `{"health":"true"}`, false otherwise (never throws)
 */
export async function etcdHealthy(
  host: string,
  clientPort: number,
  timeoutMs = 1500,
): Promise<boolean> {
  try {
    const { status, body } = await httpGet(host, clientPort, "/health", timeoutMs);
    const parsed = JSON.parse(body) as { health?: unknown };
    return status === 200 && String(parsed.health) === "true";
  } catch {
    return false;
  }
}

/**
 * Whether an etcd member is the raft leader, from `etcd_server_is_leader`
 * on its `/metrics` endpoint.
 *
 * @returns false when it is a follower or cannot be asked (never throws)
 */
export async function etcdIsLeader(
  host: string,
  clientPort: number,
  timeoutMs = 1500,
): Promise<boolean> {
  try {
    const { body } = await httpGet(host, clientPort, "/metrics", timeoutMs);
    return /^etcd_server_is_leader 1$/m.test(body);
  } catch {
    return false;
  }
}

/**
 * How many peers an etcd member currently counts as active (the sum of
 * `etcd_network_active_peers` on its `/metrics` endpoint). A peer that just
 * exited stays active for up to ~100 ms, until a redial fails.
 *
 * @returns the count, or `undefined` when the member cannot be asked
 */
export async function etcdActivePeers(
  host: string,
  clientPort: number,
  timeoutMs = 1500,
): Promise<number | undefined> {
  try {
    const { body } = await httpGet(host, clientPort, "/metrics", timeoutMs);
    let total = 0;
    for (const match of body.matchAll(/^etcd_network_active_peers\{[^}]*\} (\d+)$/gm)) {
      total += Number(match[1]);
    }
    return total;
  } catch {
    return undefined;
  }
}

/**
 * Waits (at most `timeoutMs`) until a member either does not lead or counts
 * no more active peers than are really running. An etcd leader that gets
 * SIGTERM hands leadership to its longest-connected active peer and waits
 * up to 7 s for it; a peer that has just exited must not be picked.
 *
 * @param runningPeers - how many other members of the cluster still run
 */
export async function etcdSettleBeforeStop(
  host: string,
  clientPort: number,
  runningPeers: number,
  timeoutMs = 2000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!(await etcdIsLeader(host, clientPort, 500))) return;
    const active = await etcdActivePeers(host, clientPort, 500);
    if (active === undefined || active <= runningPeers) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
