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
 * 6. Semaphores, once the adapter declares them (bench/lib/permits.ts): uncontended permit
 *    acquire + release against a raw floor of two scripts running the commands Baton's permit
 *    scripts run on an idle semaphore, and redis-semaphore's `Semaphore`; the permit handoff
 *    (and redis-semaphore's, which polls); 10,000 permits held by one coordinator.
 */
import { randomUUID } from "node:crypto";
import type { ServerGroup } from "@baton/conformance/harness";
import { RedisBackend } from "@baton/redis";
import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { Redis } from "ioredis";
import { Mutex, Semaphore } from "redis-semaphore";
import { runBackendBench } from "./lib/backend-run.js";
import { openBatonVariants } from "./lib/baton-variants.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import { interleave, latencySection } from "./lib/interleave.js";
import {
  HANDOFF_PERMITS,
  type PermitHandoffRows,
  type PermitRows,
  UNCONTENDED_PERMITS,
} from "./lib/permits.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { processCpuUs, type ServerMeter } from "./lib/server-meter.js";
import { pause, type ServiceBench, type ServiceClient } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";

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

/**
 * The permit floor's acquire: the commands Baton's permit acquire script runs on an idle
 * semaphore, written out plainly. One `HMGET` of the key's state (limit, held, granted,
 * waiting, arrivals, the session's entry count, the entry), the limit and fit checks, `INCR`
 * of the token counter, `TIME`, `ZADD` of the entry to the queue, `ZADD` of the session's
 * lease deadline, one `HSET` of the state, the session's count and the entry.
 * KEYS: queue, entries, sessions, counter. ARGV: entry id, session id, ttl ms, limit, permits,
 * holder tail. Returns the token, or 0 when not granted (nothing is left behind).
 */
const PERMIT_ACQUIRE_FLOOR = `
local m = redis.call('HMGET', KEYS[2], ':l', ':h', ':g', ':w', ':n', ARGV[2], ARGV[1])
local limit, permits = tonumber(ARGV[4]), tonumber(ARGV[5])
local held, waiting = tonumber(m[2]) or 0, tonumber(m[4]) or 0
if m[7] or (m[1] and tonumber(m[1]) ~= limit) or waiting > 0 or held + permits > limit then
  return 0
end
local token = redis.call('INCR', KEYS[4])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local n = (tonumber(m[5]) or 0) + 1
redis.call('ZADD', KEYS[1], n, ARGV[1])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
redis.call('HSET', KEYS[2], ':l', ARGV[4], ':h', held + permits, ':g', (tonumber(m[3]) or 0) + 1,
  ':w', waiting, ':n', n, ARGV[2], (tonumber(m[6]) or 0) + 1,
  ARGV[1], ARGV[5] .. ':p:' .. token .. ARGV[6])
return token
`;

/**
 * The permit floor's release: as Baton's release script on a key whose last entry goes, one
 * `HMGET` (the state and the entry), then `DEL` of the key's three keys; with other entries
 * left, `ZREM`, `HDEL` and one `HSET` of the state instead (not taken by the uncontended floor).
 * KEYS: queue, entries, sessions. ARGV: session id, entry id, the entry's permits.
 * Returns 1 when the entry was there.
 */
const PERMIT_RELEASE_FLOOR = `
local m = redis.call('HMGET', KEYS[2], ':l', ':h', ':g', ':w', ':n', ARGV[1], ARGV[2])
if not m[7] then return 0 end
local granted, waiting = tonumber(m[3]) or 0, tonumber(m[4]) or 0
if granted + waiting == 1 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[2], ':h', (tonumber(m[2]) or 0) - tonumber(ARGV[3]), ':g', granted - 1,
  ARGV[1], (tonumber(m[6]) or 1) - 1)
return 1
`;

export function run(): Promise<BackendResult> {
  return runBackendBench({
    backend: "redis",
    serverVersion,
    uncontended,
    handoffs,
    heldLocks,
    permits: {
      uncontended: permitRows,
      handoff: permitHandoffPeers,
      server: async (url, group) => {
        const stats = new Redis(url);
        return {
          options: { server: redisMeter(stats, group) },
          close: async () => {
            stats.disconnect();
          },
        };
      },
      tryRow: true,
      rounds: { warmup: 2_000, rounds: 30, perRound: 200, maxMs: 60_000 },
      handoffs: HANDOFFS,
      ttlMs: TTL_MS,
    },
    service: serviceBench,
    requestCounter: async (url) => {
      const stats = new Redis(url);
      await stats.ping();
      return {
        ...commandCounter(stats, "server: INFO commandstats, every command's calls", []),
        // INFO itself is left out; the counter's own reads send nothing else.
        close: async () => {
          stats.disconnect();
        },
      };
    },
    serviceServer: async (url, group) => {
      const stats = new Redis(url);
      return {
        options: { server: redisMeter(stats, group) },
        close: async () => {
          stats.disconnect();
        },
      };
    },
    rawWaiters: { kind: "redis", label: "raw BLPOP + RPUSH" },
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
      rounds: 30,
      perRound: 200,
      maxMs: 60_000,
      server: redisMeter(stats, group),
    });
    const share = await baton.coreShare({ warmup: 2_000, perRound: 200, maxMs: 60_000 });
    return latencySection(
      "uncontended",
      "uncontended acquire + release",
      variants,
      results,
      [
        "each variant on its own connection; Baton's session and coordinator share one RedisBackend",
      ],
      share,
    );
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
 * INFO commandstats calls of the given commands (none given: every command but INFO). (Commands a script runs count too, so the
 * script calls themselves are what to count: EVAL/EVALSHA come only from clients.)
 */
function commandCounter(client: Redis, source: string, commands: readonly string[]): ServerCounter {
  return {
    source,
    async read() {
      const info = (await client.info("commandstats")) as string;
      let total = 0;
      for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        // No commands named: every command but INFO.
        const counted = commands.length === 0 ? m[1] !== "info" : commands.includes(m[1] as string);
        if (counted) total += Number(m[2]);
      }
      return total;
    },
  };
}

async function heldLocks(url: string, items?: HeldItems) {
  // One connection for the counters, open before the window (a new connection sends commands).
  const stats = new Redis(url);
  try {
    await stats.ping();
    return await measureBackendHeldLocks(new RedisBackend({ url, keyPrefix: "bench-held:" }), {
      ...(items ? { items } : {}),
      server: [
        commandCounter(stats, "server: INFO commandstats, evalsha+eval calls", ["evalsha", "eval"]),
      ],
      notes: [
        `the renewal is one script call over every held ${items?.noun === "permits" ? "semaphore" : "key"} (its inner commands run on the server, one per key)`,
      ],
    });
  } finally {
    stats.disconnect();
  }
}

/**
 * The uncontended permit rows besides Baton's: the raw floor (the adapter's round trips with
 * the raw client) and redis-semaphore's `Semaphore` of the same permits, each on its own
 * connection.
 */
async function permitRows(url: string): Promise<PermitRows> {
  const clients: Redis[] = [];
  const client = () => {
    const c = new Redis(url);
    clients.push(c);
    return c;
  };
  const raw = client();
  const acquireSha = (await raw.script("LOAD", PERMIT_ACQUIRE_FLOOR)) as string;
  const releaseSha = (await raw.script("LOAD", PERMIT_RELEASE_FLOOR)) as string;
  const base = "bench-raw-permits{sem}:p";
  const [queue, entries, sessions] = [`${base}:q`, `${base}:e`, `${base}:s`];
  const keys = [queue, entries, sessions, `${base}:token`];
  const sessionId = randomUUID();
  const tail = "\nbench-raw";
  let n = 0;
  const semaphore = new Semaphore(client(), "bench-rs-semaphore", UNCONTENDED_PERMITS, {
    lockTimeout: TTL_MS,
  });
  return {
    floor: [
      {
        name: "raw EVALSHA permit acquire + release",
        role: "floor",
        op: async () => {
          const id = `${sessionId}.${++n}`;
          const args = [...keys, id, sessionId, TTL_MS, UNCONTENDED_PERMITS, 1, tail];
          const token = await raw.evalsha(acquireSha, 4, ...args);
          if (token === 0) throw new Error("bench: raw permit not granted");
          await raw.evalsha(releaseSha, 3, queue, entries, sessions, sessionId, id, 1);
        },
      },
    ],
    peers: [
      {
        name: "redis-semaphore Semaphore",
        role: "peer",
        op: async () => {
          await semaphore.acquire();
          await semaphore.release();
        },
      },
    ],
    notes: [
      "the floor: two scripts of the raw client that run the commands Baton's permit scripts run on an idle semaphore (acquire: HMGET, INCR, TIME, 2 ZADD, HSET; release: HMGET, DEL)",
      `redis-semaphore's Semaphore of ${UNCONTENDED_PERMITS}: acquire is one script (ZREMRANGEBYSCORE of expired entries, ZCARD, ZADD, PEXPIRE), release one ZREM`,
      "each variant on its own connection",
    ],
    close: async () => {
      for (const c of clients) c.disconnect();
    },
  };
}

/**
 * redis-semaphore's `Semaphore` in the permit handoff: the same shape as Baton's (all but one
 * permit held throughout by other instances), each contender on its own connection; it polls.
 */
async function permitHandoffPeers(url: string): Promise<PermitHandoffRows> {
  const key = "bench-rs-semaphore-handoff";
  const options = { lockTimeout: TTL_MS, acquireTimeout: 60_000 };
  const connections = Array.from(
    { length: WAITERS + 1 + HANDOFF_PERMITS - 1 },
    () => new Redis(url),
  );
  const semaphores = connections.map((c) => new Semaphore(c, key, HANDOFF_PERMITS, options));
  const holders = semaphores.slice(WAITERS + 1);
  for (const h of holders) await h.acquire();
  return {
    after: [
      {
        name: "redis-semaphore Semaphore (polls)",
        role: "peer",
        contenders: semaphores.slice(0, WAITERS + 1).map((s) => ({
          acquire: async () => {
            await s.acquire();
            return async () => {
              await s.release();
            };
          },
        })),
      },
    ],
    notes: [
      `redis-semaphore: ${HANDOFF_PERMITS - 1} Semaphore instances hold their permits throughout, ${WAITERS + 1} contend (each its own connection), polling every 10 ms (its default)`,
    ],
    close: async () => {
      for (const h of holders) await h.release().catch(() => undefined);
      for (const c of connections) c.disconnect();
    },
  };
}

/** How often the raw floor retries a taken key in the service pattern, ms. */
const SERVICE_RETRY_MS = 1;
/** The peers' retry delay in the service pattern, ms (their defaults are 200 and 10). */
const PEER_RETRY_MS = 10;

/** A service-pattern client on one ioredis connection. */
function onConnection(
  url: string,
  make: (c: Redis) => Promise<ServiceClient["op"]>,
): () => Promise<ServiceClient> {
  return async () => {
    const c = new Redis(url);
    const op = await make(c);
    return {
      op,
      close: async () => {
        c.disconnect();
      },
    };
  };
}

/**
 * The service pattern on Redis (bench/lib/service.ts): one ioredis connection per client
 * object, as a service has one; the coordinator has its RedisBackend's command connection
 * (and its subscriber connection once a caller waits).
 */
export function serviceBench(url: string): ServiceBench {
  return {
    variants: [
      {
        name: "raw SET NX PX + Lua del, one connection",
        role: "floor",
        open: onConnection(url, async (raw) => {
          const sha = (await raw.script("LOAD", DELETE_IF_OWNER)) as string;
          return async (key, signal) => {
            const value = randomUUID();
            while ((await raw.set(key.name, value, "PX", TTL_MS, "NX")) === null) {
              await pause(SERVICE_RETRY_MS, signal);
            }
            await raw.evalsha(sha, 1, key.name, value);
          };
        }),
      },
      {
        name: "baton coordinator",
        role: "coordinator",
        open: async () => {
          const coordinator = benchCoordinator({ url, ttlMs: TTL_MS, ownerId: "bench-service" });
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
        name: "redis-semaphore Mutex",
        role: "peer",
        open: onConnection(url, async (c) => async (key) => {
          const mutex = new Mutex(c, key.name, {
            lockTimeout: TTL_MS,
            acquireTimeout: 60_000,
            retryInterval: PEER_RETRY_MS,
          });
          await mutex.acquire();
          await mutex.release();
        }),
      },
      {
        name: "redlock@4 (1 node)",
        role: "peer",
        open: onConnection(url, async (c) => {
          const Redlock = await loadRedlock4();
          const redlock = new (
            Redlock as unknown as new (
              clients: unknown[],
              options: object,
            ) => Redlock4
          )([c], { retryCount: -1, retryDelay: PEER_RETRY_MS, retryJitter: 5 });
          return async (key) => {
            const lock = await redlock.lock(key.name, TTL_MS);
            await lock.unlock();
          };
        }),
      },
      {
        name: "@sesamecare-oss/redlock",
        role: "peer",
        open: onConnection(url, async (c) => {
          const redlock = new SesameRedlock([c], {
            retryCount: -1,
            retryDelay: PEER_RETRY_MS,
            retryJitter: 5,
          });
          return async (key) => {
            const lock = await redlock.acquire([key.name], TTL_MS);
            await lock.release();
          };
        }),
      },
    ],
    notes: [
      "one ioredis connection per client object (what a service gives ioredis; its commands are pipelined on it); the coordinator: its RedisBackend's command connection, plus its subscriber connection for waiting",
      `a taken key: the raw floor retries its SET NX every ${SERVICE_RETRY_MS} ms; redis-semaphore and both redlock packages retry every ${PEER_RETRY_MS} ms (redlock: jitter 5 ms); Baton waits in its queue and is woken by the release`,
    ],
    processVariants: [
      "raw SET NX PX + Lua del, one connection",
      "baton coordinator",
      "redis-semaphore Mutex",
    ],
  };
}
