/**
 * `npm run bench -- mysql`: Baton's MySQL/MariaDB backend, both modes, against raw mysql2 floors
 * sending the adapter's own statements, on one private MariaDB server started by the harness.
 *
 * 1. Uncontended acquire + release, every row interleaved (A B ... B A) in one run:
 *    - the named-lock floor: the named-lock mode's statements through mysql2 directly (the
 *      counter UPDATE whose WHERE takes GET_LOCK, with the holder row, in one transaction and
 *      one round trip; then RELEASE_LOCK), and bare GET_LOCK + RELEASE_LOCK for reference;
 *    - Baton's named-lock session and coordinator;
 *    - the row-lease floor: the row-lease mode's acquire transaction and its DELETE, through
 *      mysql2 directly on tables of its own; Baton's row-lease session and coordinator.
 * 2. Handoff with 8 waiters (named-lock mode) against blocking GET_LOCK on 9 connections.
 * 3. Takeover, throughput and 10,000 held locks (named-lock mode).
 */
import type { ServerGroup } from "@baton/conformance/harness";
import { MysqlBackend } from "@baton/mysql";
import mysql from "mysql2/promise";
import { groupCpuOptions, runBackendBench } from "./lib/backend-run.js";
import { openBatonVariants } from "./lib/baton-variants.js";
import { measureCoordinatorHandoffs } from "./lib/handoff.js";
import { type HeldItems, measureBackendHeldLocks, type ServerCounter } from "./lib/held-locks.js";
import { interleave, latencySection, type Variant } from "./lib/interleave.js";
import type { BackendResult, LatencySection, Row } from "./lib/results.js";

const TTL_MS = 15_000;
/**
 * The bare sessions' TTL: nothing renews them (no coordinator), and a row-lease session
 * expires on the server after its TTL, so it outlasts the section.
 */
const SESSION_TTL_MS = 900_000;
const WAITERS = 8;
const HANDOFFS = 300;

/** The row-lease mode's URL: the harness's, with `mode=row-lease`. */
function rowLeaseUrl(url: string): string {
  const u = new URL(url);
  u.searchParams.set("mode", "row-lease");
  return u.toString();
}

export function run(): Promise<BackendResult> {
  return runBackendBench({
    backend: "mysql",
    serverVersion,
    uncontended,
    handoffs,
    heldLocks,
    // Neither mode declares semaphores: the permit steps record that and skip.
    permits: { rounds: { warmup: 0, rounds: 0, perRound: 0 }, handoffs: 0, ttlMs: TTL_MS },
    scale: {
      locks: 20_000,
      watched: 1_000,
      why: "1,000 names watched: the named-lock mode has no watch of its own, so core's fallback reads each watched name's holder once per renewal interval, one read after the other on the session's one connection (10,000 names take 1 to 10 s a round; each notification waits for its round, up to one renewal interval, so fewer than 100 are timed); 20,000 locks: on MariaDB every named lock a connection holds adds to the server time of each acquire on that connection (the server looks through them all for every metadata lock a statement takes: measured 1.2 ms per acquire with 10,000 held, 2.6 ms with 25,000, 62 ms with 50,000, against 0.3 ms with none), so 100,000 on one connection would take hours to take",
    },
    // One connection per raw waiter: 1,000 would pass the server's max_connections.
    rawWaiters: { kind: "mysql", label: "raw blocking GET_LOCK", counts: [10] },
    takeoverTtlMs: 1_000,
    throughputTtlMs: TTL_MS,
    connections:
      "each coordinator has its own MysqlBackend (named-lock mode: a session connection, and connections of its own for waits)",
  });
}

async function serverVersion(url: string): Promise<string> {
  const c = await mysql.createConnection(url);
  try {
    const [rows] = await c.query<mysql.RowDataPacket[]>("SELECT VERSION() AS v");
    return `MariaDB ${String(rows[0]?.v ?? "unknown")}, one server`;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** The floors' tables, of their own, laid out as the adapter's (dropped at the end). */
const FLOOR_DDL = [
  `CREATE TABLE IF NOT EXISTS bench_raw_tokens (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
    value BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`,
  "INSERT IGNORE INTO bench_raw_tokens (id, value) VALUES (1, 0)",
  `CREATE TABLE IF NOT EXISTS bench_raw_holders (
    lock_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    name VARCHAR(1024) NOT NULL, connection_id BIGINT UNSIGNED NOT NULL,
    owner_id VARCHAR(1024) NOT NULL, token BIGINT UNSIGNED NOT NULL, value MEDIUMTEXT NULL
  ) ENGINE=InnoDB`,
  `CREATE TABLE IF NOT EXISTS bench_raw_sessions (id VARBINARY(64) NOT NULL PRIMARY KEY,
    owner VARCHAR(256) NOT NULL, ttl_ms INT UNSIGNED NOT NULL, expires_at DATETIME(3) NOT NULL,
    KEY expires_at (expires_at)) ENGINE=InnoDB`,
  `CREATE TABLE IF NOT EXISTS bench_raw_leases (namespace VARBINARY(80) NOT NULL,
    name VARBINARY(1024) NOT NULL, session VARBINARY(64) NOT NULL, owner VARCHAR(256) NOT NULL,
    token BIGINT UNSIGNED NOT NULL, value MEDIUMTEXT NULL, granted_at DATETIME(3) NOT NULL,
    PRIMARY KEY (namespace, name), KEY session (session)) ENGINE=InnoDB`,
  "DELETE FROM bench_raw_leases",
  `INSERT INTO bench_raw_sessions (id, owner, ttl_ms, expires_at)
    VALUES ('raw', 'bench-raw', 3600000, UTC_TIMESTAMP(3) + INTERVAL 1 HOUR)
    ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)`,
];
const FLOOR_DROP =
  "DROP TABLE IF EXISTS bench_raw_tokens, bench_raw_holders, bench_raw_sessions, bench_raw_leases";

/**
 * The named-lock mode's acquire, one round trip and one commit: the counter moves
 * (LAST_INSERT_ID hands the token back) only when GET_LOCK granted the lock, and the holder
 * row is written with it.
 */
const NAMED_ACQUIRE = `START TRANSACTION;
UPDATE bench_raw_tokens SET value = LAST_INSERT_ID(value + 1) WHERE id = 1 AND GET_LOCK(?, 0) = 1;
INSERT INTO bench_raw_holders (lock_key, name, connection_id, owner_id, token, value)
SELECT ?, ?, CONNECTION_ID(), ?, LAST_INSERT_ID(), ? FROM DUAL WHERE ROW_COUNT() = 1
ON DUPLICATE KEY UPDATE name = VALUES(name), connection_id = VALUES(connection_id),
owner_id = VALUES(owner_id), token = VALUES(token), value = VALUES(value);
COMMIT`;
const NAMED_RELEASE = "SELECT RELEASE_LOCK(?) AS released";

/**
 * The row-lease mode's acquire, one round trip: a transaction that takes a token, deletes an
 * expired lease of the name and inserts this session's; then the lease read back.
 */
const NOW = "UTC_TIMESTAMP(3)";
const LEASE_ACQUIRE = `START TRANSACTION;
UPDATE bench_raw_tokens SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
DELETE l FROM bench_raw_leases l LEFT JOIN bench_raw_sessions s ON s.id = l.session
  WHERE l.namespace = ? AND l.name = ? AND (s.id IS NULL OR s.expires_at <= ${NOW});
INSERT INTO bench_raw_leases (namespace, name, session, owner, token, value, granted_at)
  SELECT ?, ?, s.id, ?, LAST_INSERT_ID(), ?, ${NOW} FROM bench_raw_sessions s
  WHERE s.id = ? AND s.expires_at > ${NOW}
  ON DUPLICATE KEY UPDATE token = token;
COMMIT;
SELECT CAST(l.token AS CHAR) AS token, l.session = ? AS mine,
    CAST(LAST_INSERT_ID() AS CHAR) AS issued,
    (SELECT COUNT(*) FROM bench_raw_sessions m WHERE m.id = ? AND m.expires_at > ${NOW}) AS live,
    CEILING(TIMESTAMPDIFF(MICROSECOND, ${NOW}, h.expires_at) / 1000) AS remaining_ms
  FROM (SELECT 1 AS one) d
  LEFT JOIN bench_raw_leases l ON l.namespace = ? AND l.name = ?
  LEFT JOIN bench_raw_sessions h ON h.id = l.session AND h.expires_at > ${NOW}`;
const LEASE_RELEASE =
  "DELETE FROM bench_raw_leases WHERE namespace = ? AND name = ? AND session = ? AND token = ?";

/** The token an acquire's results hand back (the row-lease read's `token`), checked. */
function leaseToken(results: unknown): string {
  const rows = (results as unknown[])[5] as Array<{ token: string | null; mine: number }>;
  const row = rows[0];
  if (row?.token === null || row?.token === undefined || Number(row.mine) !== 1) {
    throw new Error("bench: raw row lease not granted");
  }
  return row.token;
}

async function uncontended(url: string, group: ServerGroup | undefined): Promise<LatencySection> {
  const raw = await mysql.createConnection({ uri: url, multipleStatements: true });
  const named = await openBatonVariants({
    backend: new MysqlBackend({ url }),
    coordinatorTtlMs: TTL_MS,
    sessionTtlMs: SESSION_TTL_MS,
    sessionLock: "bench-session",
    coordinatorLock: "bench-coordinator",
  });
  const lease = await openBatonVariants({
    backend: new MysqlBackend({ url: rowLeaseUrl(url) }),
    coordinatorTtlMs: TTL_MS,
    sessionTtlMs: SESSION_TTL_MS,
    sessionLock: "bench-lease-session",
    coordinatorLock: "bench-lease-coordinator",
  });
  try {
    for (const ddl of FLOOR_DDL) await raw.query(ddl);
    const leaseRows: Variant[] = lease.variants.map((v) => ({
      ...v,
      name: v.name.replace(/^baton /, "baton row-lease "),
      // The section's session, coordinator and floor are the named-lock mode's; the
      // row-lease mode's rows are compared with their own floor in a note.
      role: "reference",
    }));
    const variants: Variant[] = [
      {
        name: "raw named-lock statements",
        role: "floor",
        op: async () => {
          const [results] = await raw.query(NAMED_ACQUIRE, [
            "bench-raw",
            "bench-raw",
            "bench-raw",
            "bench-raw",
            null,
          ]);
          // Results: START TRANSACTION, the UPDATE (1 row when granted), the INSERT, COMMIT.
          const granted = (results as Array<{ affectedRows: number }>)[1]?.affectedRows === 1;
          if (!granted) throw new Error("bench: raw named lock not granted");
          await raw.query(NAMED_RELEASE, ["bench-raw"]);
        },
      },
      {
        name: "raw GET_LOCK + RELEASE_LOCK",
        role: "reference",
        op: async () => {
          const [rows] = await raw.query<mysql.RowDataPacket[]>("SELECT GET_LOCK(?, 0) AS got", [
            "bench-bare",
          ]);
          if (Number(rows[0]?.got) !== 1) throw new Error("bench: bare named lock not granted");
          await raw.query(NAMED_RELEASE, ["bench-bare"]);
        },
      },
      ...named.variants,
      {
        name: "raw row-lease statements",
        role: "reference",
        op: async () => {
          const [results] = await raw.query(LEASE_ACQUIRE, [
            "bench",
            "bench-raw-lease",
            "bench",
            "bench-raw-lease",
            "bench-raw",
            null,
            "raw",
            "raw",
            "raw",
            "bench",
            "bench-raw-lease",
          ]);
          const token = leaseToken(results);
          await raw.query(LEASE_RELEASE, ["bench", "bench-raw-lease", "raw", token]);
        },
      },
      ...leaseRows,
    ];
    const results = await interleave(variants, {
      warmup: 1_000,
      rounds: 30,
      perRound: 50,
      maxMs: 90_000,
      ...groupCpuOptions(group),
    });
    const share = await named.coreShare({ warmup: 1_000, perRound: 50, maxMs: 60_000 });
    const p50 = (name: string) => results.get(name)?.p50 ?? Number.NaN;
    const leaseFloor = p50("raw row-lease statements");
    const leaseCoordinator = p50("baton row-lease coordinator acquire+release");
    return latencySection(
      "uncontended",
      "uncontended acquire + release",
      variants,
      results,
      [
        "the floors send the adapter's own statements through mysql2 directly (query, values escaped by the client, several statements in one round trip): the named-lock mode's transaction of the counter UPDATE that takes GET_LOCK and the holder row, then RELEASE_LOCK; the row-lease mode's acquire transaction with its read, then the lease's DELETE",
        `row-lease mode: coordinator p50 ${leaseCoordinator.toFixed(3)} ms, ${(leaseCoordinator / leaseFloor).toFixed(2)}x its floor's ${leaseFloor.toFixed(3)} ms (the section's floor, session and coordinator rows are the named-lock mode's)`,
        "server time: the MariaDB server process's CPU (schedstat), its idle rate taken off",
      ],
      share,
    );
  } finally {
    await raw.query(FLOOR_DROP).catch(() => undefined);
    await raw.end().catch(() => undefined);
    await named.close();
    await lease.close();
  }
}

async function handoffs(
  url: string,
  floor: Row | undefined,
  group: ServerGroup | undefined,
): Promise<LatencySection> {
  // Raw: blocking GET_LOCK on one connection per contender (the server's own wait).
  const connections = await Promise.all(
    Array.from({ length: WAITERS + 1 }, () => mysql.createConnection(url)),
  );
  try {
    return await measureCoordinatorHandoffs({
      url,
      ttlMs: TTL_MS,
      waiters: WAITERS,
      before: [
        {
          name: "raw blocking GET_LOCK",
          role: "reference",
          contenders: connections.map((c) => ({
            acquire: async () => {
              await c.query("SELECT GET_LOCK('bench-raw-handoff', 60)");
              return async () => {
                await c.query("SELECT RELEASE_LOCK('bench-raw-handoff')");
              };
            },
          })),
        },
      ],
      options: { handoffs: HANDOFFS, ...groupCpuOptions(group) },
      floor,
      notes: [
        `${WAITERS + 1} contenders, each its own coordinator (own MysqlBackend, named-lock mode) or raw connection`,
      ],
    });
  } finally {
    await Promise.all(connections.map((c) => c.end().catch(() => undefined)));
  }
}

/** Statements the server has run for clients (its `Questions` counter). */
function questionsCounter(url: string): ServerCounter & { close(): Promise<void> } {
  const opened = mysql.createConnection(url);
  return {
    source: "server: SHOW GLOBAL STATUS Questions (statements run for clients)",
    read: async () => {
      const c = await opened;
      const [rows] = await c.query<mysql.RowDataPacket[]>("SHOW GLOBAL STATUS LIKE 'Questions'");
      return Number(rows[0]?.Value ?? Number.NaN);
    },
    selfCost: 1,
    close: async () => {
      await (await opened).end().catch(() => undefined);
    },
  };
}

async function heldLocks(url: string, items?: HeldItems) {
  const backend = new MysqlBackend({ url });
  const questions = questionsCounter(url);
  try {
    return await measureBackendHeldLocks(backend, {
      ...(items ? { items } : {}),
      server: [questions],
      notes: [
        "named-lock mode: the locks are GET_LOCK named locks on the session's one connection; its heartbeat is one statement, whatever the number of locks",
      ],
    });
  } finally {
    await questions.close();
  }
}
