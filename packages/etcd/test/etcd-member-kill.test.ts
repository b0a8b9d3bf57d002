import type { ServerGroup } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock } from "@baton/core";
import { expect, it } from "vitest";
import { EtcdBackend } from "../src/index.js";
import { describePrivateCluster, leaderIndex } from "./support/private-cluster.js";
import { hostsOf } from "./support/recording-client.js";

/** Clients, each holding {@link LOCKS_PER_CLIENT} locks on its one session. */
const CLIENTS = 6;
const LOCKS_PER_CLIENT = 2;
const TTL_MS = 5_000;

interface Held {
  readonly client: number;
  readonly lock: Lock;
}

/** What one kill cost. */
interface KillReport {
  /** Locks lost (signal aborted), described. */
  readonly lost: string[];
  /** Locks whose holder or token the store no longer shows, described. */
  readonly stale: string[];
  /** Clients that renewed fewer than twice after the kill, described. */
  readonly stalled: string[];
  /**
   * Clients more than one of whose renewals failed to reach a killed follower, described: a
   * client whose keepalive stream was on it moves to another member within the renewal.
   */
  readonly failedAfterFollowerKill: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Clients holding locks while members are SIGKILLed one at a time (each restarted before the
 * next kill): `hostsFor(c)` lists the members client `c` knows, `killsFor(leader)` the members
 * to kill, and `counts(c, killed)` whether client `c` must keep its locks through that kill.
 */
async function killMembers(
  group: ServerGroup,
  options: {
    readonly hostsFor: (client: number) => string[];
    readonly killsFor: (leader: number) => number[];
    readonly counts: (client: number, killed: number) => boolean;
  },
): Promise<KillReport> {
  const backends: EtcdBackend[] = [];
  const coordinators: Coordinator[] = [];
  const renewals: number[] = [];
  const log: string[] = [];
  const report: KillReport = { lost: [], stale: [], stalled: [], failedAfterFollowerKill: [] };
  /** The least lease time a counted client had left when one of its renewals failed. */
  let closest = Number.POSITIVE_INFINITY;
  let killed = -1;
  let killedFollower = false;
  /** Per client, renewals that failed to reach the follower killed last. */
  let failures: number[] = [];
  for (let c = 0; c < CLIENTS; c++) {
    const backend = new EtcdBackend({ hosts: options.hostsFor(c) });
    const note = (message: string, error?: unknown) =>
      log.push(`client-${c}: ${message} ${error instanceof Error ? error.message : ""}`);
    const coordinator = createCoordinator({
      backend,
      ttlMs: TTL_MS,
      ownerId: `client-${c}`,
      logger: { warn: note, error: note },
    });
    renewals.push(0);
    coordinator.on("renewed", () => {
      renewals[c] = (renewals[c] as number) + 1;
    });
    coordinator.on("sessionLost", ({ error }) => {
      log.unshift(`client-${c}: session lost: ${String((error as Error).message)}`);
    });
    coordinator.on("renewFailed", ({ remainingMs, error }) => {
      if (killed < 0 || !options.counts(c, killed)) return;
      closest = Math.min(closest, remainingMs);
      // Only failures to reach the dead member count: a renewal slowed by a busy machine is
      // another matter (its lock is still covered by the lost-lock check).
      const message = String((error as Error).message);
      if (killedFollower && /keepalive stream|no connection/.test(message)) {
        failures[c] = (failures[c] ?? 0) + 1;
        if (failures[c] === 2) {
          report.failedAfterFollowerKill.push(
            `follower ${killed} killed: two renewals of client-${c} failed (${message})`,
          );
        }
      }
    });
    backends.push(backend);
    coordinators.push(coordinator);
  }
  const checkerBackend = new EtcdBackend({ hosts: hostsOf(group.url) });
  const checker = createCoordinator({ backend: checkerBackend, ttlMs: TTL_MS, ownerId: "checker" });
  const run = Date.now();
  // Each client keeps taking and releasing a lock of its own meanwhile, as an app does: the
  // store sees calls, and fails some of them, while members go down.
  let busy = true;
  const traffic = coordinators.map(async (coordinator, c) => {
    while (busy) {
      try {
        const lock = await coordinator.tryAcquire(`member-kill-${run}/traffic/${c}`);
        await lock?.release();
      } catch {
        // A call that failed while a member was down: the next one goes on.
      }
      await sleep(100);
    }
  });
  try {
    for (const m of group.members) if (!m.running) await group.restart(m.index);
    for (const member of options.killsFor(await leaderIndex(group, 15_000))) {
      for (const m of group.members) if (!m.running) await group.restart(m.index);
      const leader = await leaderIndex(group, 15_000);
      const held: Held[] = [];
      for (const [c, coordinator] of coordinators.entries()) {
        for (let l = 0; l < LOCKS_PER_CLIENT; l++) {
          const name = `member-kill-${run}/${member}/${c}/${l}`;
          held.push({ client: c, lock: await coordinator.acquire(name, { waitMs: 20_000 }) });
        }
      }
      // A renewal or two first, so that every keepalive stream is open on some member.
      await sleep(TTL_MS / 2);
      const renewalsAtKill = [...renewals];
      closest = Number.POSITIVE_INFINITY;
      const what = `${member === leader ? "leader" : "follower"} ${member} killed`;
      killed = member;
      killedFollower = member !== leader;
      failures = [];
      await group.kill(member);
      // Two leases' worth: every lock renews several times through the other members.
      await sleep(2 * TTL_MS);
      const counted = held.filter((h) => options.counts(h.client, member));
      const lostNow = counted.filter((h) => !h.lock.held);
      for (const { client, lock } of lostNow) {
        const why = (lock.signal.reason as Error | undefined)?.message;
        report.lost.push(`${what}: client-${client} lost ${lock.name} (${String(why)})`);
      }
      for (const { client, lock } of counted) {
        if (lock.signal.aborted) continue;
        // The store agrees: the holder and the token are those the lock was given.
        const holder = await checker.holder(lock.name);
        if (holder?.ownerId !== `client-${client}` || holder.token !== lock.token) {
          report.stale.push(`${what}: ${lock.name} shows ${String(holder?.ownerId)}`);
        }
      }
      for (const [c, count] of renewals.entries()) {
        const after = count - (renewalsAtKill[c] as number);
        if (options.counts(c, member) && after < 2) {
          report.stalled.push(`${what}: client-${c} renewed ${after} times`);
        }
      }
      console.log(
        `${what}: ${lostNow.length} of ${counted.length} locks lost; least time left at a failed renewal: ${Math.round(closest)} ms`,
      );
      killed = -1;
      killedFollower = false;
      await group.restart(member);
      for (const { lock } of held) await lock.release().catch(() => undefined);
    }
  } finally {
    busy = false;
    await Promise.all(traffic);
    if (report.lost.length > 0) console.log([...report.lost, ...log.slice(0, 40)].join("\n"));
    await Promise.allSettled([...coordinators, checker].map((c) => c.close()));
    await Promise.allSettled([...backends, checkerBackend].map((b) => b.close()));
  }
  return report;
}

describePrivateCluster(
  "etcd members killed while locks are held (private 3-member cluster)",
  (cluster) => {
    it("clients that list every member lose no lock when each member in turn is SIGKILLed", async () => {
      const group = cluster();
      const hosts = hostsOf(group.url);
      const report = await killMembers(group, {
        // Each client lists the members starting from a different one.
        hostsFor: (c) => [...hosts.slice(c % 3), ...hosts.slice(0, c % 3)],
        // The followers first, then the leader (a follower's restart leaves the leader be).
        killsFor: (leader) => [...[0, 1, 2].filter((m) => m !== leader), leader],
        counts: () => true,
      });
      expect(report).toEqual({ lost: [], stale: [], stalled: [], failedAfterFollowerKill: [] });
    }, 180_000);

    it("a leader SIGKILL costs no lock to clients that know only a member that lives on", async () => {
      const group = cluster();
      const hosts = hostsOf(group.url);
      const report = await killMembers(group, {
        // Two clients per member, each knowing only that member.
        hostsFor: (c) => [hosts[c % 3] as string],
        killsFor: (leader) => [leader],
        counts: (c, killed) => c % 3 !== killed,
      });
      expect(report).toMatchObject({ lost: [], stale: [], stalled: [] });
    }, 120_000);
  },
);
