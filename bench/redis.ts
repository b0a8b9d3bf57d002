/**
 * `npm run bench -- redis`: Baton's Redis backend against the raw ioredis floor and the peer
 * libraries, from one run on one private redis-server started here (about a minute).
 *
 * 1. Uncontended acquire + release, interleaved (A B ... B A) so machine noise hits all alike:
 *    - raw floor: `SET key value NX PX ttl` + a Lua owner-checked delete, on one connection;
 *    - Baton session: the adapter alone (one acquire script with the INCR token, one release
 *      script with its publish);
 *    - Baton coordinator: `acquire()` + `release()` through core (what users call);
 *    - redlock@4 and @sesamecare-oss/redlock on one node, redis-semaphore's Mutex.
 * 2. Handoff: a waiter is waiting; time from the holder's `release()` call to the waiter
 *    holding the lock. Baton (woken by the release message) and redis-semaphore (polls).
 */
import { randomUUID } from "node:crypto";
import { startServers } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { RedisBackend } from "@baton/redis";
import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { Redis } from "ioredis";
import { Mutex } from "redis-semaphore";
import { batonVariants } from "./lib/baton-variants.js";
import { formatTable, interleave } from "./lib/interleave.js";
import { type Summary, summarise } from "./lib/stats.js";

/** The part of redlock@4 (which ships no types) used here. */
interface Redlock4 {
  lock(resource: string, ttl: number): Promise<{ unlock(): Promise<unknown> }>;
}
type Redlock4Constructor = new (clients: unknown[], options: { retryCount: number }) => Redlock4;

/** redlock@4 is CommonJS without types: load it untyped and describe what is used. */
async function loadRedlock4(): Promise<Redlock4Constructor> {
  const specifier: string = "redlock";
  const mod = (await import(specifier)) as { default: Redlock4Constructor };
  return mod.default;
}

const TTL_MS = 15_000;
const HANDOFFS = 300;
const DELETE_IF_OWNER = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

export async function run(): Promise<void> {
  const servers = await startServers({ backends: ["redis"] });
  const url = servers.servers.redis;
  if (url === undefined) throw new Error("bench redis: no server");
  try {
    await uncontended(url);
    await handoff(url);
  } finally {
    await servers.stop();
  }
}

async function uncontended(url: string): Promise<void> {
  const clients: Redis[] = [];
  const client = () => {
    const c = new Redis(url);
    clients.push(c);
    return c;
  };
  const raw = client();
  const deleteSha = (await raw.script("LOAD", DELETE_IF_OWNER)) as string;
  const backend = new RedisBackend({ url, keyPrefix: "bench:" });
  const session = await backend.openSession({ ttlMs: 60_000, ownerId: "bench-session" });
  const coordinator = createCoordinator({ backend, ttlMs: TTL_MS });
  const _signal = new AbortController().signal;
  const Redlock = await loadRedlock4();
  const redlock = new Redlock([client()], { retryCount: 0 });
  const sesame = new SesameRedlock([client()], { retryCount: 0 });
  const mutex = new Mutex(client(), "bench-semaphore", { lockTimeout: TTL_MS });
  try {
    const results = await interleave(
      [
        {
          name: "raw SET NX PX + Lua del",
          op: async () => {
            const value = randomUUID();
            await raw.set("bench-raw", value, "PX", TTL_MS, "NX");
            await raw.evalsha(deleteSha, 1, "bench-raw", value);
          },
        },
        ...batonVariants(session, coordinator, {
          sessionLock: "bench-session",
          coordinatorLock: "bench-coordinator",
        }),
        {
          name: "redlock@4 (1 node)",
          op: async () => {
            const lock = await redlock.lock("bench-redlock4", TTL_MS);
            await lock.unlock();
          },
        },
        {
          name: "@sesamecare-oss/redlock",
          op: async () => {
            const lock = await sesame.acquire(["bench-sesame"], TTL_MS);
            await lock.release();
          },
        },
        {
          name: "redis-semaphore Mutex",
          op: async () => {
            await mutex.acquire();
            await mutex.release();
          },
        },
      ],
      { warmup: 300, rounds: 6, perRound: 1_000, maxMs: 60_000 },
    );
    console.log(
      formatTable("redis: uncontended acquire + release", results, "raw SET NX PX + Lua del"),
    );
  } finally {
    await session.close();
    await coordinator.close();
    await backend.close();
    for (const c of clients) c.disconnect();
  }
}

async function handoff(url: string): Promise<void> {
  const results = new Map<string, Summary>();
  results.set("baton", await batonHandoff(url));
  results.set("redis-semaphore Mutex", await semaphoreHandoff(url));
  console.log(
    formatTable("redis: handoff, release() to the waiter holding the lock", results, "baton"),
  );
}

async function batonHandoff(url: string): Promise<Summary> {
  const backend = new RedisBackend({ url, keyPrefix: "bench-handoff:" });
  const coordinators: Coordinator[] = [
    createCoordinator({ backend, ttlMs: TTL_MS, ownerId: "a" }),
    createCoordinator({ backend, ttlMs: TTL_MS, ownerId: "b" }),
  ];
  const samples: number[] = [];
  const started = performance.now();
  try {
    let held = await (coordinators[0] as Coordinator).acquire("handoff");
    for (let i = 0; i < HANDOFFS + 20; i++) {
      const waiter = coordinators[(i + 1) % 2] as Coordinator;
      const waiting = waiter.acquire("handoff", { waitMs: 10_000 });
      // Let the waiter subscribe and find the lock held.
      await new Promise((r) => setTimeout(r, 3));
      const t0 = performance.now();
      await held.release();
      held = await waiting;
      if (i >= 20) samples.push(performance.now() - t0);
    }
    await held.release();
  } finally {
    for (const c of coordinators) await c.close();
    await backend.close();
  }
  return summarise(samples, performance.now() - started);
}

async function semaphoreHandoff(url: string): Promise<Summary> {
  const a = new Redis(url);
  const b = new Redis(url);
  const mutexes = [
    new Mutex(a, "bench-semaphore-handoff", { lockTimeout: TTL_MS }),
    new Mutex(b, "bench-semaphore-handoff", { lockTimeout: TTL_MS }),
  ];
  const samples: number[] = [];
  const started = performance.now();
  try {
    await (mutexes[0] as Mutex).acquire();
    for (let i = 0; i < HANDOFFS + 20; i++) {
      const holder = mutexes[i % 2] as Mutex;
      const waiter = mutexes[(i + 1) % 2] as Mutex;
      const waiting = waiter.acquire();
      await new Promise((r) => setTimeout(r, 3));
      const t0 = performance.now();
      await holder.release();
      await waiting;
      if (i >= 20) samples.push(performance.now() - t0);
    }
    await (mutexes[HANDOFFS % 2 === 0 ? 0 : 1] as Mutex).release().catch(() => undefined);
  } finally {
    a.disconnect();
    b.disconnect();
  }
  return summarise(samples, performance.now() - started);
}
