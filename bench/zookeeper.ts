/**
 * `npm run bench -- zookeeper`: Baton's ZooKeeper backend against the raw-client floor, on a
 * private 3-node ensemble started here.
 *
 * 1. Uncontended acquire + release, interleaved:
 *    - raw floor: create EPHEMERAL_SEQUENTIAL, then getChildren + exists (pipelined, one round
 *      trip, as the recipe needs), then delete, with node-zookeeper-client;
 *    - raw, four sequential calls: the same four calls one after another;
 *    - Baton session: the adapter alone;
 *    - Baton coordinator: `acquire()` + `release()` through core.
 * 2. Handoff with 8 queued waiters: time from `release()` to the next holder's grant.
 * 3. Takeover after a graceful release and after SIGKILL of the holder (session timeout 2 s).
 * 4. Throughput: 16 coordinators over 1,000 keys.
 * 5. 10,000 locks held by one coordinator: packets counted by the members (`mntr`), CPU and
 *    memory.
 * 6. Semaphores (bench/lib/permits.ts): uncontended permit acquire + release against the raw
 *    floor of the same round trips (create, getChildren + setData pipelined, delete), the
 *    permit handoff, and 10,000 permits held by one coordinator.
 *
 * All clients use the same ensemble member, so every variant pays the same hops.
 */
import { randomUUID } from "node:crypto";
import { connect as tcpConnect } from "node:net";
import type { ServerGroup } from "@baton/conformance/harness";
import { ZookeeperBackend } from "@baton/zookeeper";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import { type PermitRows, UNCONTENDED_PERMITS } from "./lib/permits.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import type { ServiceBench } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";
import { measureUncontended } from "./lib/uncontended.js";

const WAITERS = 8;
const HANDOFFS = 200;

export function run(): Promise<BackendResult> {
  // Every client talks to the same member: a write through a follower costs one more hop
  // than through the leader, and the client picks a member at random from a list.
  const oneMember = (url: string) => url.split(",")[0] as string;
  const members = (url: string) => url.replace(/^zookeeper:\/\//, "").split(",");
  return runBackendBench({
    backend: "zookeeper",
    clientUrl: oneMember,
    serverVersion: (url) => serverVersion(members(url)),
    uncontended: (url, group) => uncontended(oneMember(url), group),
    handoffs: (url, floor, group) => handoffs(oneMember(url), floor, group),
    heldLocks: (url, items) => heldLocks(oneMember(url), members(url), items),
    permits: {
      uncontended: (url) => permitRows(oneMember(url)),
      rounds: { warmup: 200, rounds: 30, perRound: 60, maxMs: 50_000 },
      handoffs: HANDOFFS,
      ttlMs: 15_000,
    },
    service: serviceBench,
    scale: {
      locks: 20_000,
      watched: 10_000,
      why: "20,000 locks: each is an ephemeral node, taken at a few hundred per second here, so 100,000 would add minutes",
    },
    takeoverTtlMs: 2_000,
    throughputTtlMs: 10_000,
    connections:
      "each coordinator has its own ZookeeperBackend (its own ZooKeeper session), all on one member",
  });
}

/** Sends a four-letter word to `host:port` and returns the reply. */
function fourLetterWord(member: string, word: string): Promise<string> {
  const [host, port] = member.split(":");
  return new Promise((resolve, reject) => {
    let reply = "";
    const socket = tcpConnect({ host: host as string, port: Number(port) });
    const timer = setTimeout(() => socket.destroy(new Error(`zookeeper ${word}: no reply`)), 5_000);
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(word));
    socket.on("data", (chunk: string) => {
      reply += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(reply);
    });
  });
}

async function serverVersion(members: readonly string[]): Promise<string> {
  const mntr = await fourLetterWord(members[0] as string, "mntr");
  const version = /^zk_version\s+([^\s,-]+)/m.exec(mntr)?.[1] ?? "unknown";
  return `ZooKeeper ${version}, ${members.length} nodes`;
}

function connect(url: string): Promise<Client> {
  const client = zookeeper.createClient(url.replace(/^zookeeper:\/\//, ""), {
    sessionTimeout: 30_000,
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("bench zookeeper: no connection")), 10_000);
    client.once("connected", () => {
      clearTimeout(timer);
      resolve(client);
    });
    client.connect();
  });
}

const call = <T>(start: (cb: (error: unknown, value: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) =>
    start((error, value) => (error ? reject(error) : resolve(value))),
  );

const removeNode = (client: Client, path: string): Promise<void> =>
  new Promise((resolve, reject) =>
    client.remove(path, -1, (error) => (error ? reject(error) : resolve())),
  );

async function uncontended(url: string, group: ServerGroup | undefined): Promise<LatencySection> {
  const raw = await connect(url);
  const dir = `/bench-raw-${randomUUID().slice(0, 8)}`;
  const data = Buffer.from(JSON.stringify({ o: "raw" }));
  const mode = zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL;
  try {
    await call((cb) => raw.mkdirp(dir, cb));
    return await measureUncontended({
      backend: ZookeeperBackend.fromUrl(url, { prefix: "bench" }),
      coordinatorTtlMs: 10_000,
      sessionTtlMs: 10_000,
      sessionLock: "bench/session",
      coordinatorLock: "bench/coordinator",
      floor: [
        {
          name: "raw create+(children|exists)+delete",
          role: "floor",
          op: async () => {
            const path = await call<string>((cb) => raw.create(`${dir}/n-`, data, mode, cb));
            await Promise.all([
              call((cb) => raw.getChildren(dir, cb)),
              call((cb) => raw.exists(path, cb)),
            ]);
            await removeNode(raw, path);
          },
        },
        {
          name: "raw 4 sequential calls",
          role: "reference",
          op: async () => {
            const path = await call<string>((cb) => raw.create(`${dir}/n-`, data, mode, cb));
            await call((cb) => raw.getChildren(dir, cb));
            await call((cb) => raw.exists(path, cb));
            await removeNode(raw, path);
          },
        },
      ],
      rounds: { warmup: 200, rounds: 30, perRound: 60, maxMs: 50_000 },
      group,
      title: "uncontended acquire + release (3 nodes)",
      notes: [
        "every client on the same member; the floor pipelines getChildren and exists as the recipe allows",
        "server time: the CPU of all three members' JVMs summed, their idle rate (read over 1 s before the rounds) taken off",
      ],
    });
  } finally {
    raw.close();
  }
}

async function handoffs(
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  return measureCoordinatorHandoffs({
    url,
    ttlMs: 10_000,
    waiters: WAITERS,
    lock: `bench/handoff-${randomUUID().slice(0, 8)}`,
    options: { handoffs: HANDOFFS, ...groupCpuOptions(group) },
    floor,
    notes: [
      `${WAITERS + 1} contenders, each its own coordinator (own ZooKeeper session); each waits on its predecessor's node`,
      "no peer library measured",
    ],
  });
}

/**
 * Sum of `zk_packets_received` over every member. What one `mntr` adds is measured (two
 * reads back to back) and taken off each read.
 */
function packetCounter(members: readonly string[]): ServerCounter {
  const sum = async () => {
    let total = 0;
    for (const m of members) {
      const mntr = await fourLetterWord(m, "mntr");
      total += Number(/^zk_packets_received\s+(\d+)/m.exec(mntr)?.[1] ?? Number.NaN);
    }
    return total;
  };
  let selfCost: number | undefined;
  let reads = 0;
  return {
    source: "server: members' mntr, zk_packets_received",
    async read() {
      if (selfCost === undefined) {
        const a = await sum();
        const b = await sum();
        selfCost = b - a;
      }
      reads++;
      return (await sum()) - selfCost * reads;
    },
  };
}

async function heldLocks(oneMember: string, members: readonly string[], items?: HeldItems) {
  return measureBackendHeldLocks(ZookeeperBackend.fromUrl(oneMember, { prefix: "bench-held" }), {
    ...(items ? { items } : {}),
    server: [packetCounter(members)],
    notes: [
      `all ${items?.noun ?? "locks"} are ephemeral nodes of one ZooKeeper session: the renewal is one session check (and the client library's own pings, counted too)`,
    ],
  });
}

/**
 * The uncontended permit floor: the round trips of Baton's permit acquire + release on an
 * idle semaphore, with node-zookeeper-client: create an EPHEMERAL_SEQUENTIAL entry named as
 * Baton names a permit entry (its permits and limit in the name), then getChildren of the
 * queue + setData of the entry (pipelined, one round trip: the list decides, the rewrite's
 * zxid is the token), then delete.
 */
async function permitRows(url: string): Promise<PermitRows> {
  const raw = await connect(url);
  const dir = `/bench-raw-permits-${randomUUID().slice(0, 8)}`;
  const data = Buffer.from(JSON.stringify({ o: "raw" }));
  const mode = zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL;
  // As long as Baton's entry names: a protected-mode prefix with an attempt id, then the lease.
  const prefix = `${dir}/_c_${randomUUID()}-lease-1-of-${UNCONTENDED_PERMITS}-`;
  try {
    await call((cb) => raw.mkdirp(dir, cb));
  } catch (error) {
    raw.close();
    throw error;
  }
  return {
    floor: [
      {
        name: "raw create+(children|setData)+delete",
        role: "floor",
        op: async () => {
          const path = await call<string>((cb) => raw.create(prefix, data, mode, cb));
          await Promise.all([
            call((cb) => raw.getChildren(dir, cb)),
            call((cb) => raw.setData(path, data, -1, cb)),
          ]);
          await removeNode(raw, path);
        },
      },
    ],
    notes: [
      "every client on the same member; the floor pipelines getChildren and setData (the permit's token is the rewrite's zxid) as Baton's permit acquire does",
      "server time: the CPU of all three members' JVMs summed, their idle rate (read over 1 s before the rounds) taken off",
    ],
    close: async () => {
      raw.close();
    },
  };
}

/**
 * The service pattern on ZooKeeper (bench/lib/service.ts): the raw floor is the lock recipe
 * with the raw client (an ephemeral sequential node under the key's node, getChildren, and
 * while not the lowest, an exists watch on the predecessor), on one ZooKeeper session; and one
 * coordinator, both on one member.
 */
export function serviceBench(url: string): ServiceBench {
  const member = url.split(",")[0] as string;
  const data = Buffer.from(JSON.stringify({ o: "raw" }));
  const mode = zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL;
  return {
    variants: [
      {
        name: "raw recipe: create+(children|exists)+delete",
        role: "floor",
        open: async () => {
          const raw = await connect(member);
          const root = `/bench-svc-${randomUUID().slice(0, 8)}`;
          const dirs = new Map<string, Promise<unknown>>();
          const dirOf = (name: string) => {
            const dir = `${root}/${name.replaceAll("/", "_")}`;
            let made = dirs.get(dir);
            if (made === undefined) {
              made = call((cb) => raw.mkdirp(dir, cb));
              dirs.set(dir, made);
            }
            return made.then(() => dir);
          };
          return {
            op: async (key, signal) => {
              const dir = await dirOf(key.name);
              const path = await call<string>((cb) => raw.create(`${dir}/n-`, data, mode, cb));
              const own = path.slice(dir.length + 1);
              try {
                for (;;) {
                  const children = (await call<string[]>((cb) => raw.getChildren(dir, cb))).sort();
                  const at = children.indexOf(own);
                  if (at <= 0) break;
                  const before = `${dir}/${children[at - 1]}`;
                  await new Promise<void>((resolve) => {
                    // One listener per wait on the cell's shared signal, taken off when the
                    // wait ends: left on, they pile up over the cell (and each add looks
                    // through the ones before it).
                    const done = () => {
                      signal.removeEventListener("abort", done);
                      resolve();
                    };
                    signal.addEventListener("abort", done, { once: true });
                    raw.exists(
                      before,
                      () => done(),
                      (error, stat) => {
                        if (error || !stat) done();
                      },
                    );
                  });
                  signal.throwIfAborted();
                }
              } finally {
                await removeNode(raw, path);
              }
            },
            close: async () => raw.close(),
          };
        },
      },
      {
        name: "baton coordinator",
        role: "coordinator",
        open: async () => {
          const coordinator = benchCoordinator({
            url: member,
            ttlMs: 10_000,
            ownerId: "bench-service",
          });
          return {
            op: async (key, signal) => {
              const lock = await coordinator.acquire(`bench/${key.name}`, {
                waitMs: 60_000,
                signal,
              });
              await lock.release();
            },
            close: () => coordinator.close(),
          };
        },
      },
    ],
    notes: [
      "one ZooKeeper session per client object, on one member; the coordinator: its ZookeeperBackend's",
      "the floor waits as the recipe does (an exists watch on its predecessor); uncontended it makes three calls one after the other: create, getChildren, delete",
    ],
    processVariants: ["raw recipe: create+(children|exists)+delete", "baton coordinator"],
  };
}
