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
 *
 * All clients use the same ensemble member, so every variant pays the same hops.
 */
import { randomUUID } from "node:crypto";
import { startServers } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { ZookeeperBackend } from "@baton/zookeeper";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { batonVariants } from "./lib/baton-variants.js";
import { formatTable, interleave } from "./lib/interleave.js";
import { type Summary, summarise } from "./lib/stats.js";

const WAITERS = 8;
const HANDOFFS = 200;

export async function run(): Promise<void> {
  const servers = await startServers({ backends: ["zookeeper"] });
  const url = servers.servers.zookeeper;
  if (url === undefined) throw new Error("bench zookeeper: no server");
  // Every client talks to the same member: a write through a follower costs one more hop
  // than through the leader, and the client picks a member at random from a list.
  const oneMember = url.split(",")[0] as string;
  try {
    await uncontended(oneMember);
    await handoff(oneMember);
  } finally {
    await servers.stop();
  }
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

async function uncontended(url: string): Promise<void> {
  const raw = await connect(url);
  const dir = `/bench-raw-${randomUUID().slice(0, 8)}`;
  await call((cb) => raw.mkdirp(dir, cb));
  const data = Buffer.from(JSON.stringify({ o: "raw" }));
  const mode = zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL;
  const backend = ZookeeperBackend.fromUrl(url, { prefix: "bench" });
  const coordinator = createCoordinator({ backend, ttlMs: 10_000 });
  const session = await backend.openSession({ ttlMs: 10_000, ownerId: "bench-session" });
  const _signal = new AbortController().signal;
  try {
    const results = await interleave(
      [
        {
          name: "raw create+(children|exists)+delete",
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
          op: async () => {
            const path = await call<string>((cb) => raw.create(`${dir}/n-`, data, mode, cb));
            await call((cb) => raw.getChildren(dir, cb));
            await call((cb) => raw.exists(path, cb));
            await removeNode(raw, path);
          },
        },
        ...batonVariants(session, coordinator, {
          sessionLock: "bench/session",
          coordinatorLock: "bench/coordinator",
        }),
      ],
      { warmup: 200, rounds: 6, perRound: 300, maxMs: 50_000 },
    );
    console.log(
      formatTable(
        "zookeeper: uncontended acquire + release (3-node ensemble)",
        results,
        "raw create+(children|exists)+delete",
      ),
    );
  } finally {
    await session.close();
    await coordinator.close();
    await backend.close();
    raw.close();
  }
}

async function handoff(url: string): Promise<void> {
  const backend = ZookeeperBackend.fromUrl(url, { prefix: "bench" });
  const coordinators: Coordinator[] = Array.from({ length: WAITERS + 1 }, (_, i) =>
    createCoordinator({ backend, ttlMs: 10_000, ownerId: `handoff-${i}` }),
  );
  const name = `bench/handoff-${randomUUID().slice(0, 8)}`;
  const samples: number[] = [];
  let releasedAt = 0;
  let done = 0;
  const started = performance.now();
  try {
    // Every coordinator loops: acquire (queued behind the others), note the handoff, release.
    await Promise.all(
      coordinators.map(async (c) => {
        while (done < HANDOFFS) {
          const lock = await c.acquire(name, { waitMs: 60_000 });
          if (releasedAt > 0) samples.push(performance.now() - releasedAt);
          done++;
          // Hold briefly so the others are queued when we let go.
          await new Promise((r) => setTimeout(r, 2));
          releasedAt = performance.now();
          await lock.release();
        }
      }),
    );
  } finally {
    await Promise.all(coordinators.map((c) => c.close()));
    await backend.close();
  }
  const summary: Summary = summarise(samples, performance.now() - started);
  console.log(
    `\nzookeeper: handoff with ${WAITERS} queued waiters (release() to next grant), ${summary.count} handoffs\n` +
      `p50 ${summary.p50.toFixed(3)} ms  p99 ${summary.p99.toFixed(3)} ms  mean ${summary.mean.toFixed(3)} ms`,
  );
}
