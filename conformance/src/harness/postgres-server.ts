import { chown } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "./free-port.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { formatLogTail } from "./log-tail.js";
import { ManagedProcess } from "./managed-process.js";
import { pgIsReady } from "./pg-isready.js";
import { withPortRetry } from "./port-retry.js";
import { findPostgresBinaries } from "./server-binaries.js";
import { type MemberDefinition, type ServerGroup, startServerGroup } from "./server-group.js";
import { ServerStartError } from "./server-start-error.js";
import { lookupUser } from "./system-user.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";

const HOST = "127.0.0.1";

/** Server settings for a disposable test instance: durability off, speed on. */
const SERVER_SETTINGS = [
  `listen_addresses=${HOST}`,
  "fsync=off",
  "synchronous_commit=off",
  "full_page_writes=off",
  "max_connections=200",
];

async function runInitdb(
  binDir: string,
  dir: string,
  dataDir: string,
  runAsUser: string | undefined,
  timeoutMs: number,
): Promise<void> {
  const logFile = join(dir, "initdb.log");
  const initdb = await ManagedProcess.start({
    name: "postgres initdb",
    command: join(binDir, "initdb"),
    args: [
      "-D",
      dataDir,
      "-U",
      "postgres",
      "--auth=trust",
      "--no-sync",
      "--no-instructions",
      "--encoding=UTF8",
      "--locale=C",
    ],
    cwd: dir,
    env: { LC_ALL: "C" },
    logFile,
    ...(runAsUser === undefined ? {} : { runAsUser }),
    programs: ["initdb", "postgres"],
  });
  const timer = setTimeout(() => initdb.killNow(), timeoutMs);
  const exit = await initdb.exited.finally(() => clearTimeout(timer));
  if (exit.code !== 0) {
    const how = exit.signal === null ? `exit code ${exit.code}` : `signal ${exit.signal}`;
    throw new ServerStartError(`postgres initdb failed (${how})\n${formatLogTail(logFile)}`, [
      logFile,
    ]);
  }
}

/** A PostgreSQL data directory made by `initdb`, ready to be started. */
export interface InitializedPostgres {
  readonly binDir: string;
  readonly runAsUser: string | undefined;
  /** The server's own directory (logs, unix socket). */
  readonly dir: string;
  readonly dataDir: string;
  readonly timeoutMs: number;
}

/**
 * Runs `initdb` in a new subdirectory `name` of `options.dir` (owned by the `postgres` user
 * when running as root).
 */
export async function initPostgres(
  options: LocalStartOptions,
  name = "pg",
): Promise<InitializedPostgres> {
  const { binDir, runAsUser } = requireBinaries(findPostgresBinaries(options.env));
  const timeoutMs = options.timeoutMs ?? startTimeoutMs(options.env);
  const dir = await makeSubdir(options.dir, name);
  const dataDir = join(dir, "data");
  if (runAsUser !== undefined) {
    const user = lookupUser(runAsUser);
    if (user === undefined) {
      throw new Error(`postgres: no user ${runAsUser} to run the server as`);
    }
    await chown(dir, user.uid, user.gid);
  }
  await runInitdb(binDir, dir, dataDir, runAsUser, timeoutMs);
  return { binDir, runAsUser, dir, dataDir, timeoutMs };
}

/** The group member running the server of `pg` on `port`. */
export function postgresMember(
  pg: InitializedPostgres,
  port: number,
  extra: readonly string[] = [],
): MemberDefinition {
  const settings = [
    ...SERVER_SETTINGS,
    ...extra,
    `port=${port}`,
    `unix_socket_directories=${pg.dir}`,
  ];
  return {
    name: "pg",
    address: `${HOST}:${port}`,
    ports: { client: port },
    dataDir: pg.dataDir,
    spec: {
      name: "postgres server",
      command: join(pg.binDir, "postgres"),
      args: ["-D", pg.dataDir, ...settings.flatMap((setting) => ["-c", setting])],
      cwd: pg.dir,
      env: { LC_ALL: "C" },
      logFile: join(pg.dir, "server.log"),
      ...(pg.runAsUser === undefined ? {} : { runAsUser: pg.runAsUser }),
      stopSignal: "SIGINT",
      programs: ["postgres", "postmaster"],
    },
    isReady: () => pgIsReady(pg.binDir, HOST, port),
  };
}

/**
 * Initializes a cluster with `initdb` and starts one PostgreSQL server on a
 * free loopback port: superuser `postgres`, trust auth, database
 * `postgres`, URL `postgres://postgres@127.0.0.1:P/postgres`.
 *
 * As root, both run as the `postgres` user through
 * `setpriv --reuid=postgres --regid=postgres --init-groups --` (PostgreSQL
 * refuses root; setpriv execs, so the recorded PID is the postmaster's).
 * The server is stopped with SIGINT (fast shutdown). Waits for `pg_isready`.
 *
 * @throws ServerStartError (with log tails) when initdb or the server fails
 */
export async function startPostgres(options: LocalStartOptions): Promise<ServerGroup> {
  const pg = await initPostgres(options);
  return withPortRetry(async () => {
    const port = await freePort(HOST);
    return startServerGroup({
      kind: "postgres",
      what: "postgres server",
      url: `postgres://postgres@${HOST}:${port}/postgres`,
      members: [postgresMember(pg, port, options.postgresSettings)],
      timeoutMs: pg.timeoutMs,
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}
