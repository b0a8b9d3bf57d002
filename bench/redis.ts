/**
 * `npm run bench -- redis`: Baton's Redis backend against the raw ioredis floor and the peer
 * libraries, on one private redis-server started here.
 *
 * 1. Uncontended acquire + release, interleaved (A B ... B A) so machine noise hits all alike:
 *    - raw floor: `SET key value NX PX ttl` + a Lua owner-checked delete, on one connection;
 *    - Baton session: the adapter alone (one acquire script with the INCR token, one release
 *      script with its publish);
 *    - Baton coordinator: `acquire()` + `release()` through core (what users call);
 *    - redlock@4 and @sesamecare-oss/redlock on one node, redis-semaphore's Mutex.
 * 2. Handoff with 8 waiters: Baton (woken by the release message) and redis-semaphore (polls).
 * 3. Takeover after a graceful release and after SIGKILL of the holder (TTL 1 s).
 * 4. Throughput: 16 coordinators over 1,000 keys.
 * 5. 10,000 locks held by one coordinator: renewal calls counted by the server (INFO
 *    commandstats), CPU and memory.
 */
import { randomUUID } from "node:crypto";
import type { ServerGroup } from "@baton/conformance/harness";
import { RedisBackend } from "@baton/redis";
import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { Redis } from "ioredis";
import { Mutex } from "redis-semaphore";
import { runBackendBench } from "./lib/backend-run.js";
import { openBatonVariants } from "./lib/baton-variants.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import { interleave, latencySection } from "./lib/interleave.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { processCpuUs, type ServerMeter } from "./lib/server-meter.js";

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
const WAITERS = 8;
const HANDOFFS = 300;
const DELETE_IF_OWNER = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

export function run(): Promise<BackendResult> {
  return runBackendBench({
    backend: "redis",
    serverVersion,
    uncontended,
    handoffs,
    heldLocks,
    takeoverTtlMs: 1_000,
    throughputTtlMs: TTL_MS,
    connections:
      "each coordinator has its own RedisBackend (a command connection, plus a subscriber connection once it waits)",
  });
}

async function serverVersion(url: string): Promise<string> {
  const client = new Redis(url);
  try {
    const info = (await client.info("server")) as string;
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown";
    return `redis-server ${version}, one node`;
  } finally {
    client.disconnect();
  }
}

/**
 * redis-server's CPU time (schedstat, every thread) as the total, and INFO commandstats usec
 * by command as the parts. Redis counts the commands a script runs on their own as well as in
 * the script's time, so the parts are not summed. INFO's own entry is left out.
 */
function redisMeter(stats: Redis, group: ServerGroup | undefined): ServerMeter {
  const pid = group?.pids[0];
  return {
    source: pid === undefined ? "INFO commandstats usec, summed" : "redis-server CPU (schedstat)",
    partsSource:
      "INFO commandstats usec by command; a script's time includes the commands it runs, which are also listed on their own",
    async read() {
      const total = pid === undefined ? undefined : processCpuUs(pid);
      const info = (await stats.info("commandstats")) as string;
      const parts: Record<string, number> = {};
      for (const m of info.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) {
        if (m[1] !== "info") parts[m[1] as string] = Number(m[2]);
      }
      return { total: total ?? Object.values(parts).reduce((a, b) => a + b, 0), parts };
    },
  };
}

async function uncontended(url: string, group: ServerGroup | undefined): Promise<LatencySection> {
  const clients: Redis[] = [];
  const client = () => {
    const c = new Redis(url);
    clients.push(c);
    return c;
  };
  const raw = client();
  const stats = client();
  const deleteSha = (await raw.script("LOAD", DELETE_IF_OWNER)) as string;
  const baton = await openBatonVariants({
    backend: new RedisBackend({ url, keyPrefix: "bench:" }),
    coordinatorTtlMs: TTL_MS,
    sessionTtlMs: 60_000,
    sessionLock: "bench-session",
    coordinatorLock: "bench-coordinator",
    tryRow: true,
  });
  const Redlock = await loadRedlock4();
  const redlock = new Redlock([client()], { retryCount: 0 });
  const sesame = new SesameRedlock([client()], { retryCount: 0 });
  const mutex = new Mutex(client(), "bench-semaphore", { lockTimeout: TTL_MS });
  try {
    const variants = [
      {
        name: "raw SET NX PX + Lua del",
        role: "floor" as const,
        op: async () => {
          const value = randomUUID();
          await raw.set("bench-raw", value, "PX", TTL_MS, "NX");
          await raw.evalsha(deleteSha, 1, "bench-raw", value);
        },
      },
      ...baton.variants,
      {
        name: "redlock@4 (1 node)",
        role: "peer" as const,
        op: async () => {
          const lock = await redlock.lock("bench-redlock4", TTL_MS);
          await lock.unlock();
        },
      },
      {
        name: "@sesamecare-oss/redlock",
        role: "peer" as const,
        op: async () => {
          const lock = await sesame.acquire(["bench-sesame"], TTL_MS);
          await lock.release();
        },
      },
      {
        name: "redis-semaphore Mutex",
        role: "peer" as const,
        op: async () => {
          await mutex.acquire();
          await mutex.release();
        },
      },
    ];
    const results = await interleave(variants, {
      // Enough for V8 to have compiled every variant's path (see bench/postgres.ts).
      warmup: 2_000,
      rounds: 6,
      perRound: 1_000,
      maxMs: 60_000,
      server: redisMeter(stats, group),
    });
    return latencySection("uncontended", "uncontended acquire + release", variants, results, [
      "each variant on its own connection; Baton's session and coordinator share one RedisBackend",
    ]);
  } finally {
    await baton.close();
    for (const c of clients) c.disconnect();
  }
}

async function handoffs(
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  const connections = Array.from({ length: WAITERS + 1 }, () => new Redis(url));
  const stats = new Redis(url);
  const mutexes = connections.map(
    (c) => new Mutex(c, "bench-semaphore-handoff", { lockTimeout: TTL_MS }),
  );
  try {
    return await measureCoordinatorHandoffs({
      url,
      ttlMs: TTL_MS,
      waiters: WAITERS,
      after: [
        {
          name: "redis-semaphore Mutex (polls)",
          role: "peer",
          contenders: mutexes.map((m) => ({
            acquire: async () => {
              await m.acquire();
              return async () => {
                await m.release();
              };
            },
          })),
        },
      ],
      options: { handoffs: HANDOFFS, server: redisMeter(stats, group) },
      floor,
      notes: [
        `${WAITERS + 1} contenders, each its own coordinator (own RedisBackend) or Mutex (own connection)`,
      ],
    });
  } finally {
    for (const c of connections) c.disconnect();
    stats.disconnect();
  }
}

/**
 * INFO commandstats calls of the given commands. (Commands a script runs count too, so the
 * script calls themselves are what to count: EVAL/EVALSHA come only from clients.)
 */
function commandCounter(client: Redis, source: string, commands: readonly string[]): ServerCounter {
  return {
    source,
    async read() {
      const info = (await client.info("commandstats")) as string;
      let total = 0;
      for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        if (commands.includes(m[1] as string)) total += Number(m[2]);
      }
      return total;
    },
  };
}

async function heldLocks(url: string) {
  // One connection for the counters, open before the window (a new connection sends commands).
  const stats = new Redis(url);
  try {
    await stats.ping();
    return await measureBackendHeldLocks(new RedisBackend({ url, keyPrefix: "bench-held:" }), {
      server: [
        commandCounter(stats, "server: INFO commandstats, evalsha+eval calls", ["evalsha", "eval"]),
      ],
      notes: [
        "the renewal is one script call over every held key (its inner commands run on the server, one per key)",
      ],
    });
  } finally {
    stats.disconnect();
  }
}
