import type { ServerGroup } from "@baton/conformance/harness";
import { PostgresBackend } from "@baton/postgres";
import advisoryLockModule from "advisory-lock";
import pg from "pg";
import { runBackendBench } from "./lib/backend-run.js";
import { openBatonVariants } from "./lib/baton-variants.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import { interleave, latencySection, type Measured, type Variant } from "./lib/interleave.js";
import { type PermitRows, UNCONTENDED_PERMITS } from "./lib/permits.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";
import { processCpuMeter, processTreeCpuMeter, type ServerMeter } from "./lib/server-meter.js";
import { pause, type ServiceBench, type ServiceKey } from "./lib/service.js";
import { benchCoordinator } from "./lib/telemetry.js";

/** The part of advisory-lock's API the bench uses. */
type CreateMutex = (
  conString: string,
) => (name: string) => { tryLock(): Promise<(() => Promise<void>) | undefined> };
// advisory-lock is CommonJS with `exports.default`: under ESM the default import is the module.
const createMutex = ((advisoryLockModule as unknown as { default?: unknown }).default ??
  advisoryLockModule) as CreateMutex;

const WAITERS = 8;
const HANDOFFS = 300;
const FLOOR_LOCK = "SELECT pg_try_advisory_lock($1::bigint)";
const FLOOR_UNLOCK = "SELECT pg_advisory_unlock($1::bigint)";

export function run(): Promise<BackendResult> {
  return runBackendBench({
    backend: "postgres",
    serverVersion,
    uncontended,
    handoffs,
    heldLocks,
    permits: {
      // Every server process: Baton's rows share one backend, whose connections are not named.
      server: async (_url, group) => ({
        options:
          group?.pids[0] === undefined
            ? {}
            : {
                server: processTreeCpuMeter(
                  "every server process's CPU (schedstat; ended processes by 10 ms ticks)",
                  group.pids[0],
                ),
                idleMs: 500,
              },
        close: async () => undefined,
      }),
      uncontended: (url) => permitRows(url),
      tryRow: true,
      rounds: { warmup: 1_000, rounds: 30, perRound: 100, maxMs: 60_000 },
      handoffs: HANDOFFS,
      ttlMs: 15_000,
    },
    service: serviceBench,
    serviceServer: async (_url, group) => ({
      options:
        group?.pids[0] === undefined
          ? {}
          : {
              server: processTreeCpuMeter(
                "every server process's CPU (schedstat; ended processes by 10 ms ticks)",
                group.pids[0],
              ),
              idleMs: 500,
            },
      close: async () => undefined,
    }),
    scale: {
      locks: 20_000,
      watched: 10_000,
      why: "20,000 locks: every advisory lock a connection holds adds to the server time of each statement on that connection, because PostgreSQL ends each transaction by walking every lock the connection holds, session locks included (measured with pg on loopback, PostgreSQL 15: a SELECT 1 round trip takes 0.15 ms with none held, 0.47 ms with 10,000, 1.0 ms with 20,000, 4.0 ms with 50,000 and 14-17 ms with 100,000), and the server's shared lock table (max_locks_per_transaction x connections, about 23,000 entries on the bench's server, max_connections 200) must hold them all; taking 100,000 on one connection would take about ten minutes, and each acquire with them held costs about 100 times one with none",
    },
    // One connection per raw waiter: 1,000 would pass the server's max_connections.
    rawWaiters: { kind: "postgres", label: "raw blocking pg_advisory_lock", counts: [10] },
    takeoverTtlMs: 1_000,
    throughputTtlMs: 15_000,
    connections:
      "each coordinator has its own PostgresBackend (a session connection, on which it also waits)",
  });
}

async function serverVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>("SHOW server_version");
    return `PostgreSQL ${rows[0]?.server_version ?? "unknown"}, one server`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** `url` with an application_name, so the server processes of its connections can be found. */
function named(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", name);
  return u.toString();
}

/**
 * CPU time of the server processes serving the connections named `name` (looked up at every
 * read through `stats`, so connections opened later count too), each process a part.
 */
function connectionsMeter(stats: pg.Client, name: string): ServerMeter {
  const find = async () =>
    (
      await stats.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
        [name],
      )
    ).rows.map((r) => r.pid);
  const inner = (pids: readonly number[]) =>
    processCpuMeter(
      "",
      () => pids,
      (pid) => `backend ${pid}`,
    );
  return {
    source: "the variant's own server processes' CPU (schedstat)",
    read: async () => inner(await find()).read(),
  };
}

async function uncontended(url: string, group: ServerGroup | undefined): Promise<LatencySection> {
  const raw = new pg.Client({ connectionString: named(url, "bench-raw") });
  raw.on("error", () => undefined);
  const stats = new pg.Client({ connectionString: url });
  stats.on("error", () => undefined);
  await stats.connect();
  // One backend per Baton variant, so each variant's server processes are known by name.
  const baton = await openBatonVariants({
    sessionBackend: new PostgresBackend({ url: named(url, "bench-session") }),
    backend: new PostgresBackend({ url: named(url, "bench-coordinator") }),
    coordinatorTtlMs: 15_000,
    sessionTtlMs: 60_000,
    sessionLock: "bench-session",
    coordinatorLock: "bench-coordinator",
    tryRow: true,
  });
  const mutex = createMutex(url)("bench-advisory-lock");
  const rawMeter = connectionsMeter(stats, "bench-raw");
  const postmaster = group?.pids[0];
  try {
    const variants: Variant[] = [
      {
        name: "raw try_lock+unlock",
        role: "floor",
        server: rawMeter,
        setup: async () => {
          await raw.connect();
        },
        // Prepared (named) statements, as Baton's are: parsed once per connection.
        op: async () => {
          await raw.query({ name: "floor_lock", text: FLOOR_LOCK, values: ["42"] });
          await raw.query({ name: "floor_unlock", text: FLOOR_UNLOCK, values: ["42"] });
        },
      },
      {
        // What `client.query(text, values)` costs: an unnamed statement, parsed every time.
        name: "raw try_lock+unlock, unnamed statements",
        role: "reference",
        server: rawMeter,
        op: async () => {
          await raw.query(FLOOR_LOCK, ["44"]);
          await raw.query(FLOOR_UNLOCK, ["44"]);
        },
      },
      ...baton.variants.map((v) => ({
        ...v,
        server: connectionsMeter(
          stats,
          v.role === "coordinator" ? "bench-coordinator" : "bench-session",
        ),
      })),
    ];
    const results = await interleave(variants, {
      // Enough for V8 to have compiled every variant's path (measured: with 100, Baton's
      // coordinator still ran slow, JIT-compiling, ops in the first rounds; the floor too).
      warmup: 1_000,
      rounds: 30,
      perRound: 50,
      maxMs: 60_000,
    });
    // advisory-lock opens a connection per lock: a server process started and ended per op.
    // That load slows whatever runs next (measured: the floor by about 10%, which made Baton
    // look closer to it), so the peer runs in a block of its own, interleaved with Baton's
    // coordinator (whose row here is not reported).
    const peer: Variant = {
      name: "advisory-lock tryLock+unlock",
      role: "peer",
      // A server process per lock: every process of the server, those that ended included.
      ...(postmaster === undefined
        ? {}
        : {
            server: processTreeCpuMeter(
              "every server process's CPU (schedstat; ended processes by 10 ms ticks)",
              postmaster,
            ),
          }),
      op: async () => {
        const unlock = await mutex.tryLock();
        if (unlock === undefined) throw new Error("bench: advisory-lock held");
        await unlock();
      },
    };
    const companion = variants.find((v) => v.role === "coordinator") as Variant;
    const peerResults = await interleave([companion, peer], {
      warmup: 20,
      rounds: 4,
      perRound: 100,
      maxMs: 30_000,
      idleMs: 500,
    });
    results.set(peer.name, peerResults.get(peer.name) as Measured);
    variants.push(peer);
    const share = await baton.coreShare({ warmup: 1_000, perRound: 50, maxMs: 60_000 });
    return latencySection(
      "uncontended",
      "uncontended acquire + release",
      variants,
      results,
      [
        "Baton's acquire also takes a fencing token (a sequence) and keeps it in one shared advisory lock in the same statement (a holder row when a value is given, or past 64 keys per session); the floor and Baton both use prepared statements",
        "advisory-lock opens a connection per lock; it is measured in a block of its own (interleaved with Baton's coordinator), since the server processes it starts and ends slow whatever runs next",
        "server time: the CPU of the variant's own server processes (found by application_name; Baton's session and coordinator each have their own PostgresBackend); for advisory-lock, of every server process",
      ],
      share,
    );
  } finally {
    await baton.close();
    await raw.end().catch(() => undefined);
    await stats.end().catch(() => undefined);
  }
}

async function handoffs(
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  const postmaster = group?.pids[0];
  // Raw: blocking pg_advisory_lock on one connection per contender (PostgreSQL's own queue).
  const clients = await Promise.all(
    Array.from({ length: WAITERS + 1 }, async () => {
      const c = new pg.Client({ connectionString: url });
      c.on("error", () => undefined);
      await c.connect();
      return c;
    }),
  );
  try {
    return await measureCoordinatorHandoffs({
      url,
      ttlMs: 15_000,
      waiters: WAITERS,
      before: [
        {
          name: "raw blocking pg_advisory_lock",
          role: "reference",
          contenders: clients.map((c) => ({
            acquire: async () => {
              await c.query("SELECT pg_advisory_lock(7)");
              return async () => {
                await c.query("SELECT pg_advisory_unlock(7)");
              };
            },
          })),
        },
      ],
      options: {
        handoffs: HANDOFFS,
        ...(postmaster === undefined
          ? {}
          : {
              server: processTreeCpuMeter(
                "every server process's CPU (schedstat; ended processes by 10 ms ticks)",
                postmaster,
              ),
              idleMs: 500,
            }),
      },
      floor,
      notes: [
        `${WAITERS + 1} contenders, each its own coordinator (own PostgresBackend) or raw connection`,
      ],
    });
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
}

/**
 * Statements sent by every pg client of this process (`pg.Client.prototype.query` calls),
 * counted while the bench holds its locks: the held-locks coordinator is the only pg user then.
 */
function statementCounter(): ServerCounter & { stop(): void } {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let calls = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    calls++;
    return original.apply(this, args);
  };
  return {
    source: "client: statements sent (pg Client.query calls)",
    read: async () => calls,
    stop: () => {
      proto.query = original;
    },
  };
}

async function heldLocks(url: string, items?: HeldItems) {
  const backend = new PostgresBackend({ url });
  const statements = statementCounter();
  try {
    return await measureBackendHeldLocks(backend, {
      ...(items ? { items } : {}),
      server: [statements],
      notes: [
        "client-side count: pg_stat_database reaches the counters late (backends flush their statistics at most once a second), so statements are counted where they are sent",
        ...(items?.noun === "permits"
          ? []
          : [
              "the locks are session-level advisory locks on the session's one connection; the renewal is one statement over the held keys",
            ]),
      ],
    });
  } finally {
    statements.stop();
  }
}

/** The permit floor's tables and token sequence (its own, dropped at the end). */
const PERMIT_FLOOR_DDL = [
  "CREATE SEQUENCE IF NOT EXISTS bench_raw_permit_tokens",
  `CREATE UNLOGGED TABLE IF NOT EXISTS bench_raw_permit_queues (
    name text COLLATE "C" PRIMARY KEY, permits integer NOT NULL,
    held bigint NOT NULL DEFAULT 0, queued bigint NOT NULL DEFAULT 0,
    boundary bigint NOT NULL DEFAULT 0)`,
  `CREATE UNLOGGED TABLE IF NOT EXISTS bench_raw_permits (
    name text COLLATE "C" NOT NULL, id bigint NOT NULL, session bigint NOT NULL,
    owner text NOT NULL, permits integer NOT NULL, mode text NOT NULL,
    granted boolean NOT NULL, token bigint, value text,
    PRIMARY KEY (name, id), UNIQUE (name, session, id))`,
];

/**
 * The permit floor's acquire, one statement: take the permits on the key's queue row (while
 * they fit) with the next token, and insert the entry. Baton's acquire function does this
 * work (and more: it locks the row, then writes it back) in one call.
 */
const PERMIT_FLOOR_ACQUIRE = `WITH q AS (
  UPDATE bench_raw_permit_queues SET held = held + $2, queued = queued + $2,
    boundary = nextval('bench_raw_permit_tokens')
  WHERE name = $1 AND queued + $2 <= permits RETURNING boundary)
INSERT INTO bench_raw_permits (name, id, session, owner, permits, mode, granted, token)
SELECT $1, boundary, $3, 'bench-raw', $2, 'permit', true, boundary FROM q RETURNING id`;

/** The permit floor's release, one statement: delete the entry and give its permits back. */
const PERMIT_FLOOR_RELEASE = `WITH d AS (
  DELETE FROM bench_raw_permits WHERE name = $1 AND id = $2 AND session = $3 RETURNING permits)
UPDATE bench_raw_permit_queues q SET held = q.held - d.permits, queued = q.queued - d.permits
FROM d WHERE q.name = $1 RETURNING q.held`;

/**
 * The uncontended permit floor: the adapter's round trips (one statement to acquire, one to
 * release) with pg's raw client and prepared statements, doing the same rows' work in plain
 * SQL on tables of its own.
 */
async function permitRows(url: string): Promise<PermitRows> {
  const raw = new pg.Client({ connectionString: named(url, "bench-raw-permits") });
  raw.on("error", () => undefined);
  await raw.connect();
  try {
    for (const ddl of PERMIT_FLOOR_DDL) await raw.query(ddl);
    await raw.query(
      "INSERT INTO bench_raw_permit_queues (name, permits) VALUES ('sem', $1) ON CONFLICT (name) DO UPDATE SET held = 0, queued = 0",
      [UNCONTENDED_PERMITS],
    );
    await raw.query("DELETE FROM bench_raw_permits");
  } catch (error) {
    await raw.end().catch(() => undefined);
    throw error;
  }
  return {
    floor: [
      {
        name: "raw permit acquire+release statements",
        role: "floor",
        op: async () => {
          const { rows } = await raw.query<{ id: string }>({
            name: "permit_floor_acquire",
            text: PERMIT_FLOOR_ACQUIRE,
            values: ["sem", 1, "7"],
          });
          const id = rows[0]?.id;
          if (id === undefined) throw new Error("bench: raw permit not granted");
          await raw.query({
            name: "permit_floor_release",
            text: PERMIT_FLOOR_RELEASE,
            values: ["sem", id, "7"],
          });
        },
      },
    ],
    notes: [
      "the floor: two prepared statements (take the permits on the key's queue row with the next token and insert the entry; delete it and give them back), the rows' work of Baton's two function calls in plain SQL",
      "server time: every server process's CPU (Baton's session and coordinator share one backend, whose connections are not told apart)",
    ],
    close: async () => {
      await raw
        .query(
          "DROP TABLE IF EXISTS bench_raw_permits, bench_raw_permit_queues; DROP SEQUENCE IF EXISTS bench_raw_permit_tokens",
        )
        .catch(() => undefined);
      await raw.end().catch(() => undefined);
    },
  };
}

/** Connections of the raw floor's pool in the service pattern: what a service gives pg.Pool. */
const SERVICE_POOL = 16;
/** How often the raw floor and advisory-lock retry a taken key in the service pattern, ms. */
const SERVICE_RETRY_MS = 1;

/** try_lock (retrying every SERVICE_RETRY_MS while taken) + unlock of `key` on `client`. */
async function floorLock(
  client: pg.ClientBase,
  key: ServiceKey,
  signal: AbortSignal,
): Promise<void> {
  const values = [String(key.id)];
  for (;;) {
    const { rows } = await client.query<{ pg_try_advisory_lock: boolean }>({
      name: "floor_lock",
      text: FLOOR_LOCK,
      values,
    });
    if (rows[0]?.pg_try_advisory_lock === true) break;
    await pause(SERVICE_RETRY_MS, signal);
  }
  await client.query({ name: "floor_unlock", text: FLOOR_UNLOCK, values });
}

/**
 * The service pattern on PostgreSQL (bench/lib/service.ts): the raw floor on a pg.Pool of 16
 * (what a service gives pg; each lock checks out a connection, locks, unlocks and gives it
 * back), the raw client on one connection for reference, one coordinator (its
 * PostgresBackend's connections), and advisory-lock (a connection per lock, so only at C = 1
 * and 16 and never on the hot key).
 */
export function serviceBench(url: string): ServiceBench {
  return {
    variants: [
      {
        name: `raw pg.Pool of ${SERVICE_POOL}, try_lock+unlock`,
        role: "floor",
        open: async () => {
          const pool = new pg.Pool({ connectionString: url, max: SERVICE_POOL });
          pool.on("error", () => undefined);
          return {
            op: async (key, signal) => {
              for (;;) {
                const client = await pool.connect();
                try {
                  const { rows } = await client.query<{ pg_try_advisory_lock: boolean }>({
                    name: "floor_lock",
                    text: FLOOR_LOCK,
                    values: [String(key.id)],
                  });
                  if (rows[0]?.pg_try_advisory_lock === true) {
                    await client.query({
                      name: "floor_unlock",
                      text: FLOOR_UNLOCK,
                      values: [String(key.id)],
                    });
                    return;
                  }
                } finally {
                  client.release();
                }
                await pause(SERVICE_RETRY_MS, signal);
              }
            },
            close: () => pool.end(),
          };
        },
      },
      {
        name: "raw pg.Client, one connection",
        role: "reference",
        open: async () => {
          const client = new pg.Client({ connectionString: url });
          client.on("error", () => undefined);
          await client.connect();
          return {
            op: (key, signal) => floorLock(client, key, signal),
            close: () => client.end(),
          };
        },
      },
      {
        name: "baton coordinator",
        role: "coordinator",
        open: async () => {
          const coordinator = benchCoordinator({
            url,
            ttlMs: 15_000,
            ownerId: "bench-service",
          });
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
        name: "advisory-lock tryLock+unlock",
        role: "peer",
        callers: [1, 16],
        modes: ["distinct", "random"],
        open: async () => {
          const mutexOf = createMutex(url);
          return {
            op: async (key, signal) => {
              for (;;) {
                const unlock = await mutexOf(key.name).tryLock();
                if (unlock !== undefined) {
                  await unlock();
                  return;
                }
                await pause(SERVICE_RETRY_MS, signal);
              }
            },
            close: async () => undefined,
          };
        },
      },
    ],
    notes: [
      `the floor: pg.Pool of ${SERVICE_POOL} connections, prepared statements, a connection checked out per lock (session advisory locks are held by a connection); the one-connection row: concurrent callers queue on pg.Client (no pipelining), and session advisory locks are re-entrant, so on that one connection two callers of one key do not exclude each other`,
      `a taken key: the raw rows and advisory-lock retry every ${SERVICE_RETRY_MS} ms; Baton waits as its adapter does`,
      "advisory-lock opens a connection (a server process) per lock: measured at C = 1 and 16, not on the hot key",
    ],
    processVariants: ["raw pg.Client, one connection", "baton coordinator"],
  };
}
