import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "./free-port.js";
import { type LocalStartOptions, requireBinaries } from "./local-start-options.js";
import { formatLogTail } from "./log-tail.js";
import { ManagedProcess } from "./managed-process.js";
import { mariadbPing } from "./mariadb-ping.js";
import { withPortRetry } from "./port-retry.js";
import { findMariadbBinaries } from "./server-binaries.js";
import { type ServerGroup, startServerGroup } from "./server-group.js";
import { ServerStartError } from "./server-start-error.js";
import { startTimeoutMs } from "./wait-for-ready.js";
import { makeSubdir } from "./work-dir.js";

const HOST = "127.0.0.1";

/** The database the harness creates for tests. */
export const MARIADB_DATABASE = "baton";
/** The user the harness creates for tests (all privileges, password {@link MARIADB_PASSWORD}). */
export const MARIADB_USER = "baton";
/** The password of {@link MARIADB_USER}. */
export const MARIADB_PASSWORD = "baton-secret";

/**
 * Settings for a disposable, light server that starts quickly: small buffers, durability off
 * (no flush per commit, no doublewrite buffer), no binary log, no name resolution, no native
 * AIO (unavailable in some containers). Given to `mariadb-install-db` too, so the redo log it
 * creates has the size the server expects.
 */
const SERVER_SETTINGS = [
  "--skip-name-resolve",
  "--innodb-buffer-pool-size=16M",
  "--innodb-log-file-size=8M",
  "--innodb-log-buffer-size=1M",
  "--innodb-flush-log-at-trx-commit=0",
  "--innodb-doublewrite=0",
  "--innodb-use-native-aio=0",
  "--innodb-buffer-pool-load-at-startup=0",
  "--innodb-buffer-pool-dump-at-shutdown=0",
  "--aria-pagecache-buffer-size=8M",
  "--key-buffer-size=1M",
  "--performance-schema=OFF",
  "--skip-log-bin",
];

/**
 * Runs once at every start (idempotent): the test database and a password user that may do
 * anything (tests create databases of their own and kill connections).
 */
const INIT_SQL = [
  `CREATE DATABASE IF NOT EXISTS \`${MARIADB_DATABASE}\`;`,
  `CREATE USER IF NOT EXISTS '${MARIADB_USER}'@'%' IDENTIFIED BY '${MARIADB_PASSWORD}';`,
  `GRANT ALL PRIVILEGES ON *.* TO '${MARIADB_USER}'@'%' WITH GRANT OPTION;`,
  "",
].join("\n");

/** Options added when running as root: mariadbd refuses root unless told to run as it. */
function userArgs(): string[] {
  return process.getuid?.() === 0 ? ["--user=root"] : [];
}

async function installDb(
  installDbPath: string,
  dir: string,
  dataDir: string,
  timeoutMs: number,
): Promise<void> {
  const logFile = join(dir, "install-db.log");
  const install = await ManagedProcess.start({
    name: "mariadb-install-db",
    command: installDbPath,
    args: [
      "--no-defaults",
      `--datadir=${dataDir}`,
      ...userArgs(),
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...SERVER_SETTINGS,
    ],
    cwd: dir,
    logFile,
    programs: ["mariadb-install-db", "mysql_install_db", "mariadbd", "mysqld", "sh", "bash"],
  });
  const timer = setTimeout(() => install.killNow(), timeoutMs);
  const exit = await install.exited.finally(() => clearTimeout(timer));
  if (exit.code !== 0) {
    const how = exit.signal === null ? `exit code ${exit.code}` : `signal ${exit.signal}`;
    throw new ServerStartError(`mariadb-install-db failed (${how})\n${formatLogTail(logFile)}`, [
      logFile,
    ]);
  }
}

/** URLs of the one MariaDB server, by the backend kind that uses it. */
export interface MariadbUrls {
  /** The named-lock mode: `mysql://baton:baton-secret@127.0.0.1:P/baton`. */
  readonly mysql: string;
  /** The row-lease mode: `mariadb://baton:baton-secret@127.0.0.1:P/baton?mode=row-lease`. */
  readonly "mysql-lease": string;
}

/** The URLs of a MariaDB server listening on `port`. */
export function mariadbUrls(port: number): MariadbUrls {
  const where = `${MARIADB_USER}:${MARIADB_PASSWORD}@${HOST}:${port}/${MARIADB_DATABASE}`;
  return { mysql: `mysql://${where}`, "mysql-lease": `mariadb://${where}?mode=row-lease` };
}

/**
 * Initializes a data directory with `mariadb-install-db` and starts one MariaDB server on a free
 * loopback port, light and quick to start (see the settings above), with database `baton` and
 * user `baton` (password `baton-secret`, all privileges). The group's URL is the one of `kind`
 * (see {@link mariadbUrls}); both modes of `@baton/mysql` can share the server (see
 * {@link groupForKind}).
 *
 * As root the server runs as root (`--user=root`). It is stopped with SIGTERM (a clean
 * shutdown) and restarts from its data directory.
 *
 * @throws ServerStartError (with log tails) when mariadb-install-db or the server fails
 */
export async function startMariadb(
  options: LocalStartOptions & { readonly kind?: "mysql" | "mysql-lease" },
): Promise<ServerGroup> {
  const { mariadbd, installDb: installDbPath } = requireBinaries(findMariadbBinaries(options.env));
  const timeoutMs = options.timeoutMs ?? startTimeoutMs(options.env);
  const dir = await makeSubdir(options.dir, "db");
  const dataDir = join(dir, "data");
  await installDb(installDbPath, dir, dataDir, timeoutMs);
  const initFile = join(dir, "init.sql");
  await writeFile(initFile, INIT_SQL);
  const kind = options.kind ?? "mysql";
  return withPortRetry(async () => {
    const port = await freePort(HOST);
    return startServerGroup({
      kind,
      what: "mariadb server",
      url: mariadbUrls(port)[kind],
      members: [
        {
          name: "db",
          address: `${HOST}:${port}`,
          ports: { client: port },
          dataDir,
          spec: {
            name: "mariadb server",
            command: mariadbd,
            args: [
              "--no-defaults",
              `--datadir=${dataDir}`,
              ...userArgs(),
              `--bind-address=${HOST}`,
              `--port=${port}`,
              `--socket=${join(dir, "mysqld.sock")}`,
              `--pid-file=${join(dir, "mysqld.pid")}`,
              `--tmpdir=${dir}`,
              `--init-file=${initFile}`,
              "--max-connections=1000",
              // A closed connection's thread waits in the cache instead of ending: the bench
              // reads the server's CPU time per thread, and an ended thread takes its time along.
              "--thread-cache-size=1000",
              ...SERVER_SETTINGS,
            ],
            cwd: dir,
            logFile: join(dir, "server.log"),
            stopSignal: "SIGTERM",
            programs: ["mariadbd", "mysqld"],
          },
          isReady: () => mariadbPing(HOST, port),
        },
      ],
      timeoutMs,
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}

/**
 * The server group `group` (a MariaDB server) seen as the group of another backend kind that uses
 * the same server: the same members and controls, with `kind` and `url` of its own. Stopping
 * either stops the one server.
 */
export function groupForKind(
  group: ServerGroup,
  kind: "mysql" | "mysql-lease",
  url: string,
): ServerGroup {
  return {
    kind,
    url,
    get members() {
      return group.members;
    },
    get pids() {
      return group.pids;
    },
    stop: () => group.stop(),
    stopMember: (member) => group.stopMember(member),
    kill: (member) => group.kill(member),
    pause: (member) => group.pause(member),
    resume: (member) => group.resume(member),
    restart: (member) => group.restart(member),
    logTail: (member, lines) => group.logTail(member, lines),
  };
}

/** The port a MariaDB group's server listens on. */
export function mariadbPort(group: ServerGroup): number {
  const port = group.members[0]?.ports.client;
  if (port === undefined) throw new Error("mariadb server group has no member");
  return port;
}
