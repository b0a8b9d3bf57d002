/**
 * `npm run bench -- postgres`: Baton's PostgreSQL backend against the raw floor and the
 * `advisory-lock` npm package, on a private server started here.
 *
 * 1. Uncontended acquire + release, interleaved:
 *    - raw floor: `pg_try_advisory_lock` + `pg_advisory_unlock` on one connection;
 *    - Baton session: the adapter alone (one-statement acquire with token + holder row, release);
 *    - Baton coordinator: `acquire()` + `release()` through core;
 *    - advisory-lock: `tryLock()` + unlock (it opens a connection per lock).
 * 2. Handoff with 8 waiters: time from `release()` to the next holder's grant, for Baton and
 *    for raw blocking `pg_advisory_lock` on 8 connections.
 */
import { startServers } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator } from "@baton/core";
import { PostgresBackend } from "@baton/postgres";
import advisoryLockModule from "advisory-lock";
import pg from "pg";
import { batonVariants } from "./lib/baton-variants.js";
import { coordinatorContenders, measureHandoff } from "./lib/handoff.js";
import { formatTable, interleave } from "./lib/interleave.js";
import type { Summary } from "./lib/stats.js";

/** The part of advisory-lock's API the bench uses. */
type CreateMutex = (
  conString: string,
) => (name: string) => { tryLock(): Promise<(() => Promise<void>) | undefined> };
// advisory-lock is CommonJS with `exports.default`: under ESM the default import is the module.
const createMutex = ((advisoryLockModule as unknown as { default?: unknown }).default ??
  advisoryLockModule) as CreateMutex;

const WAITERS = 8;
const HANDOFFS = 300;

export async function run(): Promise<void> {
  const servers = await startServers({ backends: ["postgres"] });
  const url = servers.servers.postgres;
  if (url === undefined) throw new Error("bench postgres: no server");
  try {
    await uncontended(url);
    await handoff(url);
  } finally {
    await servers.stop();
  }
}

async function uncontended(url: string): Promise<void> {
  const raw = new pg.Client({ connectionString: url });
  raw.on("error", () => undefined);
  const backend = new PostgresBackend({ url });
  const coordinator = createCoordinator({ backend, ttlMs: 15_000 });
  const session = await backend.openSession({ ttlMs: 60_000, ownerId: "bench-session" });
  const _signal = new AbortController().signal;
  const mutex = createMutex(url)("bench-advisory-lock");
  try {
    const results = await interleave(
      [
        {
          name: "raw try_lock+unlock",
          setup: async () => {
            await raw.connect();
          },
          op: async () => {
            await raw.query("SELECT pg_try_advisory_lock($1::bigint)", ["42"]);
            await raw.query("SELECT pg_advisory_unlock($1::bigint)", ["42"]);
          },
        },
        ...batonVariants(session, coordinator, {
          sessionLock: "bench-session",
          coordinatorLock: "bench-coordinator",
        }),
        {
          name: "advisory-lock tryLock+unlock",
          op: async () => {
            const unlock = await mutex.tryLock();
            if (unlock === undefined) throw new Error("bench: advisory-lock held");
            await unlock();
          },
        },
      ],
      { warmup: 100, rounds: 6, perRound: 250, maxMs: 60_000 },
    );
    console.log(
      formatTable("postgres: uncontended acquire + release", results, "raw try_lock+unlock"),
    );
  } finally {
    await session.close();
    await coordinator.close();
    await backend.close();
    await raw.end().catch(() => undefined);
  }
}

/**
 * `WAITERS` contenders loop on one lock: hold 2 ms, release, pause 5 ms, wait again; so each
 * release finds the others waiting. Records release-start to next-grant.
 */
async function handoff(url: string): Promise<void> {
  const results = new Map<string, Summary>();
  // Raw floor: blocking pg_advisory_lock on one connection per contender (PostgreSQL's queue).
  const clients = await Promise.all(
    Array.from({ length: WAITERS }, async () => {
      const c = new pg.Client({ connectionString: url });
      c.on("error", () => undefined);
      await c.connect();
      return c;
    }),
  );
  try {
    results.set(
      "raw blocking pg_advisory_lock",
      await measureHandoff(
        clients.map((c) => ({
          acquire: async () => {
            await c.query("SELECT pg_advisory_lock(7)");
            return async () => {
              await c.query("SELECT pg_advisory_unlock(7)");
            };
          },
        })),
        HANDOFFS,
      ),
    );
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
  const backend = new PostgresBackend({ url });
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
  console.log(
    formatTable(
      `postgres: handoff to the next of ${WAITERS} waiters, ${HANDOFFS} handoffs (release -> next grant; ops/s = handoffs/s incl. 7 ms hold+pause)`,
      results,
      "raw blocking pg_advisory_lock",
    ),
  );
}
