import type { ServerGroup } from "@baton/conformance/harness";
import { EtcdBackend } from "@baton/etcd";
import {
  CompareResult,
  CompareTarget,
  Etcd3,
  EtcdLockFailedError,
  type ICompare,
  type IRequestOp,
  SortOrder,
  SortTarget,
} from "etcd3";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { measureCoordinatorHandoffs, sleep } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import { type PermitRows, UNCONTENDED_PERMITS } from "./lib/permits.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { pause, type ServiceBench } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";
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
      uncontended: (url) => permitRows(hostsOf(url)),
      rounds: { warmup: 50, rounds: 30, perRound: 20, maxMs: 60_000 },
      handoffs: HANDOFFS,
      ttlMs: 15_000,
    },
    service: serviceBench,
    scale: {
      locks: 20_000,
      watched: 10_000,
      why: "20,000 locks: each is a key on the session's lease, taken at a few hundred per second here, so 100,000 would add minutes",
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
  let lease: KeptLease | undefined;
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
            lease = await keptLease(raw);
            leaseId = lease.id;
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
            await lease?.revoke();
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
      rounds: { warmup: 50, rounds: 30, perRound: 20, maxMs: 60_000 },
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
    notes:
      items?.noun === "permits"
        ? []
        : ["every lock of the session is on one lease: one keepalive renews them all"],
  });
}

/** A floor's lease, kept alive until revoked. */
interface KeptLease {
  readonly id: string;
  revoke(): Promise<void>;
}

/**
 * A 60 s lease that etcd3 keeps alive (a keepalive every 20 s) until revoked, so a floor's keys
 * outlive a long run; losing it fails the floor's next put, which the bench counts as an error.
 */
async function keptLease(raw: Etcd3): Promise<KeptLease> {
  const lease = raw.lease(60);
  const id = await lease.grant();
  return { id, revoke: () => lease.revoke().catch(() => undefined) };
}

/** The first key after every key that starts with `prefix`. */
function rangeEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  end[end.length - 1] = (end[end.length - 1] as number) + 1;
  return end;
}

/** No key in `[key, end)`. */
const noKeyIn = (key: Buffer, end: Buffer): ICompare => ({
  key,
  range_end: end,
  target: CompareTarget.Create,
  result: CompareResult.Equal,
  create_revision: 0,
});

/**
 * The uncontended permit floor: the two transactions of Baton's permit acquire + release on
 * an idle semaphore, with etcd3's raw client. Acquire: while the limit key holds the limit
 * (it does not: the last release deleted it), put the entry and read the queue; else, while
 * no entry is there, store the limit, put the entry on the lease, read the entries oldest
 * first and the token key. Release: while ours and the only entry, delete it and the limit
 * key; else delete it alone.
 */
async function permitRows(hosts: string[]): Promise<PermitRows> {
  const raw = new Etcd3({ hosts });
  let lease: KeptLease | undefined;
  let leaseId = "0";
  const base = Buffer.from("bench-raw\xffpermits:sem\xff", "latin1");
  const entries = Buffer.concat([base, Buffer.from("e:")]);
  const entriesEnd = rangeEnd(entries);
  const limitKey = Buffer.concat([base, Buffer.from("limit")]);
  const tokenKey = Buffer.concat([base, Buffer.from("token")]);
  const limit = Buffer.from(String(UNCONTENDED_PERMITS));
  const value = Buffer.from(
    JSON.stringify({ baton: 1, owner: "bench-raw", permits: 1, mode: "permit" }),
  );
  let leaseHex = "";
  let n = 0;
  return {
    floor: [
      {
        name: "raw txn join+leave",
        role: "floor",
        setup: async () => {
          lease = await keptLease(raw);
          leaseId = lease.id;
          leaseHex = BigInt(leaseId).toString(16);
        },
        op: async () => {
          const key = Buffer.concat([entries, Buffer.from(`${leaseHex}.${++n}`)]);
          const join: IRequestOp[] = [
            { request_put: { key, value, lease: leaseId } },
            {
              request_range: {
                key: entries,
                range_end: entriesEnd,
                sort_target: SortTarget.Create,
                sort_order: SortOrder.Ascend,
              },
            },
            { request_range: { key: tokenKey } },
          ];
          const joined = await raw.kv.txn({
            compare: [
              {
                key: limitKey,
                target: CompareTarget.Value,
                result: CompareResult.Equal,
                value: limit,
              },
            ],
            success: join,
            failure: [
              {
                request_txn: {
                  compare: [noKeyIn(entries, entriesEnd)],
                  success: [{ request_put: { key: limitKey, value: limit } }, ...join],
                  failure: [
                    { request_range: { key: limitKey } },
                    { request_range: { key: entries, range_end: entriesEnd, count_only: true } },
                  ],
                },
              },
            ],
          });
          const inner = joined.responses[0]?.response_txn;
          if (!joined.succeeded && inner?.succeeded !== true) {
            throw new Error("bench: raw permit not granted");
          }
          const revision = joined.header.revision;
          await raw.kv.txn({
            compare: [
              {
                key,
                target: CompareTarget.Create,
                result: CompareResult.Equal,
                create_revision: revision,
              },
              noKeyIn(entries, key),
              noKeyIn(Buffer.concat([key, Buffer.from([0])]), entriesEnd),
            ],
            success: [
              { request_delete_range: { key } },
              { request_delete_range: { key: limitKey } },
            ],
            failure: [
              {
                request_txn: {
                  compare: [
                    {
                      key,
                      target: CompareTarget.Create,
                      result: CompareResult.Equal,
                      create_revision: revision,
                    },
                  ],
                  success: [{ request_delete_range: { key } }],
                },
              },
            ],
          });
        },
        teardown: async () => {
          await lease?.revoke();
        },
      },
    ],
    notes: [
      "the floor: Baton's two transactions on an idle semaphore (join: the nested branch that stores the limit, puts the entry on the lease and reads the queue; leave: delete the entry and the limit key), with etcd3's raw client",
      "server time: the CPU of all three members summed, their idle rate (read over 1 s before the rounds) taken off",
    ],
    close: async () => {
      raw.close();
    },
  };
}

/**
 * The service pattern on etcd (bench/lib/service.ts): the raw floor (create-if-absent on a
 * lease, guarded delete, retrying a taken key every 1 ms) on one etcd3 client, one
 * coordinator, and etcd3's lock (retrying every 10 ms) on one client.
 */
export function serviceBench(url: string): ServiceBench {
  const hosts = url.replace(/^etcd:\/\//, "").split(",");
  return {
    variants: [
      {
        name: "raw txn create+guarded delete",
        role: "floor",
        open: async () => {
          const raw = new Etcd3({ hosts });
          const kept = await keptLease(raw);
          const lease = kept.id;
          return {
            op: async (key, signal) => {
              const k = Buffer.from(`bench-svc/${key.name}`);
              for (;;) {
                const created = await raw.kv.txn({
                  compare: [
                    {
                      key: k,
                      target: CompareTarget.Create,
                      result: CompareResult.Equal,
                      create_revision: 0,
                    },
                  ],
                  success: [{ request_put: { key: k, value: Buffer.from(""), lease } }],
                });
                if (created.succeeded) {
                  await raw.kv.txn({
                    compare: [
                      {
                        key: k,
                        target: CompareTarget.Create,
                        result: CompareResult.Equal,
                        create_revision: created.header.revision,
                      },
                    ],
                    success: [{ request_delete_range: { key: k } }],
                  });
                  return;
                }
                await pause(1, signal);
              }
            },
            close: async () => {
              await kept.revoke();
              raw.close();
            },
          };
        },
      },
      {
        name: "baton coordinator",
        role: "coordinator",
        open: async () => {
          const coordinator = benchCoordinator({ url, ttlMs: 15_000, ownerId: "bench-service" });
          return {
            op: async (key, signal) => {
              const lock = await coordinator.acquire(key.name, { waitMs: 60_000, signal });
              await lock.release();
            },
            close: () => coordinator.close(),
          };
        },
      },
      {
        name: "etcd3 lock, retry every 10 ms",
        role: "peer",
        open: async () => {
          const client = new Etcd3({ hosts });
          return {
            op: async (key, signal) => {
              for (;;) {
                const lock = client.lock(`bench-svc-etcd3/${key.name}`);
                try {
                  await lock.acquire();
                  await lock.release();
                  return;
                } catch (error) {
                  if (!(error instanceof EtcdLockFailedError)) throw error;
                  signal.throwIfAborted();
                  await sleep(10);
                }
              }
            },
            close: async () => client.close(),
          };
        },
      },
    ],
    notes: [
      "one etcd3 client (over all members) per client object; the coordinator: its EtcdBackend's",
      "a taken key: the raw floor retries every 1 ms, etcd3's lock (which cannot wait) every 10 ms; Baton waits on its predecessor's key",
    ],
    processVariants: ["raw txn create+guarded delete", "baton coordinator"],
  };
}
