import { checkHistory, History, RecordedCoordinator } from "@baton/conformance/history";
import { BackendUnavailableError, createCoordinator } from "@baton/core";
import { expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import { describePrivateCluster, leaderIndex } from "./support/private-cluster.js";
import { hostsOf } from "./support/recording-client.js";

describePrivateCluster("etcd leader killed while a lock is held (private cluster)", (cluster) => {
  it("keeps the lock through the leader change, and tokens keep rising", async () => {
    const group = cluster();
    const hosts = hostsOf(group.url);
    const backend = new EtcdBackend({ hosts });
    const other = new EtcdBackend({ hosts });
    // After the leader dies, etcd may take up to ~7 s (its request timeout) to answer the
    // next write: a 10 s lease rides that out.
    const holder = createCoordinator({ backend, ttlMs: 10_000, ownerId: "holder" });
    const rival = createCoordinator({ backend: other, ttlMs: 10_000, ownerId: "rival" });
    const history = new History();
    const h = new RecordedCoordinator(history, "holder", holder);
    const r = new RecordedCoordinator(history, "rival", rival);
    try {
      const lock = await h.acquire("leader-kill");
      const before = await r.acquire("leader-kill-other");
      await r.release(before);
      expect(lock.token).toBeLessThan(before.token);

      let renewedAfterKill = 0;
      holder.on("renewed", () => {
        renewedAfterKill++;
      });
      const leader = await leaderIndex(group, 10_000);
      await group.kill(leader);
      renewedAfterKill = 0;
      const killedAt = performance.now();
      await leaderIndex(group, 15_000);
      // Hold on until two renewals went through the new leader (or a lost lock shows).
      while (renewedAfterKill < 2 && lock.held && performance.now() - killedAt < 25_000) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(lock.held).toBe(true);
      expect(renewedAfterKill).toBeGreaterThanOrEqual(2);
      expect(await rival.holder("leader-kill")).toMatchObject({
        ownerId: "holder",
        token: lock.token,
      });
      expect(await rival.tryAcquire("leader-kill")).toBeNull();

      const after = await r.acquire("leader-kill-other", { waitMs: 20_000 });
      expect(after.token).toBeGreaterThan(before.token);
      await r.release(after);
      expect(await h.release(lock)).toBe(true);
      const next = await r.acquire("leader-kill", { waitMs: 20_000 });
      expect(next.token).toBeGreaterThan(after.token);
      await r.release(next);
      // The whole history, renewals through the leader change included: no violation.
      expect(checkHistory(history, { fencing: true }).map((v) => v.message)).toEqual([]);
    } finally {
      await Promise.allSettled([holder.close(), rival.close()]);
      await Promise.allSettled([backend.close(), other.close()]);
    }
  }, 90_000);

  it("a release cut short by the leader's death is followed by a grant with a greater token", async () => {
    const group = cluster();
    for (const m of group.members) if (!m.running) await group.restart(m.index);
    const leader = await leaderIndex(group, 15_000);
    const address = (group.members[leader] as { address: string }).address;
    // Talks to the leader only: while it is down this coordinator reaches no member at all.
    const backend = new EtcdBackend({ hosts: [address], requestTimeoutMs: 1_000 });
    // A lease that outlives the member's restart on a busy machine: the session must survive.
    const coordinator = createCoordinator({ backend, ttlMs: 15_000, ownerId: "releaser" });
    let sessionsLost = 0;
    coordinator.on("sessionLost", () => {
      sessionsLost++;
    });
    try {
      const name = `leader-kill-release-${Date.now()}`;
      const first = await coordinator.acquire(name);
      // Frozen, the leader takes the release's request and never answers it; then it dies.
      group.pause(leader);
      const releasing = first.release().then(
        () => "released",
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, 200));
      await group.kill(leader);
      expect(await releasing).toBeInstanceOf(BackendUnavailableError);
      expect(first.signal.aborted).toBe(true);
      await group.restart(leader);
      const next = await coordinator.acquire(name, { waitMs: 40_000 });
      // The same session throughout: it is this session's next grant that must rise.
      expect(sessionsLost).toBe(0);
      expect(next.token).toBeGreaterThan(first.token);
      expect(await coordinator.holder(name)).toMatchObject({
        ownerId: "releaser",
        token: next.token,
      });
      expect(await next.release()).toBe(true);
    } finally {
      await coordinator.close();
      await backend.close();
    }
  }, 90_000);
});
