import type { ServerGroup } from "@baton/conformance/harness";
import { EtcdBackend } from "@baton/etcd";
import { CompareResult, CompareTarget, Etcd3, EtcdLockFailedError } from "etcd3";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { measureCoordinatorHandoffs, sleep } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { measureUncontended } from "./lib/uncontended.js";

const WAITERS = 8;
const HANDOFFS = 200;

export function run(): Promise<BackendResult> {
  const hostsOf = (url: string) => url.replace(/^etcd:\/\//, "").split(",");
  return runBackendBench({
    backend: "etcd",
    serverVersion: (url) => serverVersion(hostsOf(url)),
    uncontended: (url, group) => uncontended(hostsOf(url), group),
    handoffs: (url, floor, group) => handoffs(url, hostsOf(url), floor, group),
    heldLocks: (url, items) => heldLocks(hostsOf(url), items),
    permits: {
      rounds: { warmup: 50, rounds: 6, perRound: 100, maxMs: 60_000 },
      handoffs: HANDOFFS,
      ttlMs: 15_000,
    },
    takeoverTtlMs: 2_000,
    throughputTtlMs: 15_000,
    connections: "each coordinator has its own EtcdBackend (its own etcd3 client)",
  });
}

async function serverVersion(hosts: readonly string[]): Promise<string> {
  const reply = (await (await fetch(`http://${hosts[0]}/version`)).json()) as {
    etcdserver?: string;
  };
  return `etcd ${reply.etcdserver ?? "unknown"}, ${hosts.length} members`;
}

async function uncontended(
  hosts: string[],
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  const raw = new Etcd3({ hosts });
  const peer = new Etcd3({ hosts });
  let leaseId = "0";
  const rawKey = Buffer.from("bench-raw/lock");
  try {
    return await measureUncontended({
      backend: new EtcdBackend({ hosts }),
      coordinatorTtlMs: 15_000,
      sessionTtlMs: 60_000,
      sessionLock: "bench-session",
      coordinatorLock: "bench-coordinator",
      floor: [
        {
          name: "raw txn create+guarded delete",
          role: "floor",
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
      ],
      peers: [
        {
          name: "etcd3 lock().acquire+release",
          role: "peer",
          op: async () => {
            const lock = peer.lock("bench-etcd3");
            await lock.acquire();
            await lock.release();
          },
        },
      ],
      rounds: { warmup: 50, rounds: 6, perRound: 100, maxMs: 60_000 },
      group,
      title: "uncontended acquire + release (3 members)",
      notes: [
        "each variant on its own etcd3 client over all members; Baton's session and coordinator share one EtcdBackend",
        "server time: the CPU of all three members summed, their idle rate (read over 1 s before the rounds) taken off",
      ],
    });
  } finally {
    raw.close();
    peer.close();
  }
}

async function handoffs(
  url: string,
  hosts: string[],
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  const clients = Array.from({ length: WAITERS + 1 }, () => new Etcd3({ hosts }));
  try {
    return await measureCoordinatorHandoffs({
      url,
      ttlMs: 15_000,
      waiters: WAITERS,
      after: [
        {
          name: "etcd3 lock, retry every 10 ms",
          role: "peer",
          contenders: clients.map((client) => ({
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
        },
      ],
      options: { handoffs: HANDOFFS, ...groupCpuOptions(group) },
      floor,
      notes: [
        `${WAITERS + 1} contenders, each its own coordinator (own EtcdBackend) or etcd3 client; Baton waits on its predecessor's key, etcd3's lock cannot wait so it retries`,
      ],
    });
  } finally {
    for (const c of clients) c.close();
  }
}

/** Sum over every member of a /metrics counter (series whose labels match `labels`). */
function metricCounter(
  hosts: readonly string[],
  source: string,
  name: string,
  labels: RegExp,
): ServerCounter {
  return {
    source,
    async read() {
      let total = 0;
      for (const host of hosts) {
        const text = await (await fetch(`http://${host}/metrics`)).text();
        for (const line of text.split("\n")) {
          if (!line.startsWith(`${name}{`) || !labels.test(line)) continue;
          total += Number(line.slice(line.lastIndexOf(" ") + 1));
        }
      }
      return total;
    },
  };
}

async function heldLocks(hosts: string[], items?: HeldItems) {
  return measureBackendHeldLocks(new EtcdBackend({ hosts }), {
    ...(items ? { items } : {}),
    server: [
      metricCounter(
        hosts,
        "server: members' /metrics, LeaseKeepAlive messages received",
        "grpc_server_msg_received_total",
        /grpc_method="LeaseKeepAlive"/,
      ),
      metricCounter(
        hosts,
        "server: members' /metrics, every gRPC message received",
        "grpc_server_msg_received_total",
        /./,
      ),
    ],
    notes: items
      ? []
      : ["every lock of the session is on one lease: one keepalive renews them all"],
  });
}
