/**
 * `npm run bench -- etcd`: Baton's etcd backend against the raw floor and the `etcd3` package's
 * own lock, on a private 3-member cluster started here.
 *
 * 1. Uncontended acquire + release, interleaved:
 *    - raw floor: one txn creating the key on a long-lived lease + one revision-guarded delete;
 *    - Baton session: the adapter alone (one-txn acquire, guarded delete);
 *    - Baton coordinator: `acquire()` + `release()` through core;
 *    - etcd3: `lock(name).acquire()` + `release()` (a lease per lock, try-only).
 * 2. Handoff with 8 waiters: time from `release()` to the next holder's grant, for Baton
 *    (predecessor watch) and for etcd3's lock retried every 10 ms (it cannot wait).
 */
import { startServers } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { EtcdBackend } from "@baton/etcd";
import { CompareResult, CompareTarget, Etcd3, EtcdLockFailedError } from "etcd3";
import { batonVariants } from "./lib/baton-variants.js";
import { coordinatorContenders, measureHandoff, sleep } from "./lib/handoff.js";
import { formatTable, interleave } from "./lib/interleave.js";
import type { Summary } from "./lib/stats.js";

const WAITERS = 8;
const HANDOFFS = 200;

export async function run(): Promise<void> {
  const servers = await startServers({ backends: ["etcd"] });
  const url = servers.servers.etcd;
  if (url === undefined) throw new Error("bench etcd: no server");
  const hosts = url.replace(/^etcd:\/\//, "").split(",");
  try {
    await uncontended(hosts);
    await handoff(hosts);
  } finally {
    await servers.stop();
  }
}

async function uncontended(hosts: string[]): Promise<void> {
  const raw = new Etcd3({ hosts });
  const backend = new EtcdBackend({ hosts });
  const coordinator = createCoordinator({ backend, ttlMs: 15_000 });
  const session = await backend.openSession({ ttlMs: 60_000, ownerId: "bench-session" });
  const _signal = new AbortController().signal;
  const peer = new Etcd3({ hosts });
  let leaseId = "0";
  const rawKey = Buffer.from("bench-raw/lock");
  try {
    const results = await interleave(
      [
        {
          name: "raw txn create+guarded delete",
          setup: async () => {
            leaseId = (await raw.leaseClient.leaseGrant({ TTL: 60 })).ID;
          },
          op: async () => {
            const created = await raw.kv.txn({
              compare: [
                {
                  key: rawKey,
                  target: CompareTarget.Create,
                  result: CompareResult.Equal,
                  create_revision: 0,
                },
              ],
              success: [{ request_put: { key: rawKey, value: Buffer.from(""), lease: leaseId } }],
            });
            if (!created.succeeded) throw new Error("bench: raw key exists");
            await raw.kv.txn({
              compare: [
                {
                  key: rawKey,
                  target: CompareTarget.Create,
                  result: CompareResult.Equal,
                  create_revision: created.header.revision,
                },
              ],
              success: [{ request_delete_range: { key: rawKey } }],
            });
          },
          teardown: async () => {
            await raw.leaseClient.leaseRevoke({ ID: leaseId }).catch(() => undefined);
          },
        },
        ...batonVariants(session, coordinator, {
          sessionLock: "bench-session",
          coordinatorLock: "bench-coordinator",
          wait: true,
        }),
        {
          name: "etcd3 lock().acquire+release",
          op: async () => {
            const lock = peer.lock("bench-etcd3");
            await lock.acquire();
            await lock.release();
          },
        },
      ],
      { warmup: 50, rounds: 6, perRound: 100, maxMs: 60_000 },
    );
    console.log(
      formatTable("etcd: uncontended acquire + release", results, "raw txn create+guarded delete"),
    );
  } finally {
    await session.close();
    await coordinator.close();
    await backend.close();
    raw.close();
    peer.close();
  }
}

/**
 * `WAITERS` contenders loop on one lock: hold 2 ms, release, pause 5 ms, wait again; so each
 * release finds the others waiting. Records release-start to next-grant.
 */
async function handoff(hosts: string[]): Promise<void> {
  const results = new Map<string, Summary>();
  const backend = new EtcdBackend({ hosts });
  const coordinators: Coordinator[] = Array.from({ length: WAITERS }, () =>
    createCoordinator({ backend, ttlMs: 15_000 }),
  );
  try {
    results.set(
      "baton acquire (wait)",
      await measureHandoff(coordinatorContenders(coordinators, "bench-handoff"), HANDOFFS),
    );
  } finally {
    await Promise.all(coordinators.map((c) => c.close()));
    await backend.close();
  }
  const clients = Array.from({ length: WAITERS }, () => new Etcd3({ hosts }));
  try {
    results.set(
      "etcd3 lock, retry every 10 ms",
      await measureHandoff(
        clients.map((client) => ({
          acquire: async () => {
            for (;;) {
              const lock = client.lock("bench-etcd3-handoff");
              try {
                await lock.acquire();
                return async () => {
                  await lock.release();
                };
              } catch (error) {
                if (!(error instanceof EtcdLockFailedError)) throw error;
                await sleep(10);
              }
            }
          },
        })),
        HANDOFFS,
      ),
    );
  } finally {
    for (const c of clients) c.close();
  }
  console.log(
    formatTable(
      `etcd: handoff to the next of ${WAITERS} waiters, ${HANDOFFS} handoffs (release -> next grant; ops/s = handoffs/s incl. 7 ms hold+pause)`,
      results,
      "baton acquire (wait)",
    ),
  );
}
