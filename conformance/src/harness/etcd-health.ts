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
