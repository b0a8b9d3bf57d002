import {
  describeBackend,
  etcdIsLeader,
  type ServerGroup,
  type StartedServers,
  startServers,
} from "@baton/conformance/harness";
import { afterAll, beforeAll, describe } from "vitest";

/**
 * A `describe` block (run when etcd is selected) with a 3-member etcd cluster of its own,
 * started before its tests and stopped after them, so members can be killed without
 * disturbing other tests. `tests` registers the tests; `cluster()` gives the cluster's group
 * inside a test.
 */
export function describePrivateCluster(
  title: string,
  tests: (cluster: () => ServerGroup) => void,
): void {
  describeBackend("etcd", () => {
    describe(title, () => {
      let servers: StartedServers | undefined;
      let group: ServerGroup | undefined;
      beforeAll(async () => {
        servers = await startServers({ backends: ["etcd"] });
        group = servers.groups.etcd;
        if (group === undefined) throw new Error("no etcd group");
      });
      afterAll(async () => {
        await servers?.stop();
      });
      tests(() => {
        if (group === undefined) throw new Error("the private etcd cluster did not start");
        return group;
      });
    });
  });
}

/** The index of the running member that leads, waiting up to `timeoutMs` for an election. */
export async function leaderIndex(group: ServerGroup, timeoutMs: number): Promise<number> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const running = group.members.filter((m) => m.running);
    const leading = await Promise.all(
      running.map((m) => etcdIsLeader("127.0.0.1", m.ports.client as number).catch(() => false)),
    );
    const at = leading.indexOf(true);
    if (at >= 0) return (running[at] as { index: number }).index;
    if (performance.now() > until) throw new Error("etcd: no leader elected");
    await new Promise((r) => setTimeout(r, 50));
  }
}
