import { chown, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "./free-port.js";
import type { LocalStartOptions } from "./local-start-options.js";
import { pgIsReady } from "./pg-isready.js";
import { withPortRetry } from "./port-retry.js";
import { initPostgres, postgresMember } from "./postgres-server.js";
import { requirePgBouncer } from "./server-binaries.js";
import { type ServerGroup, startServerGroup } from "./server-group.js";
import { lookupUser } from "./system-user.js";

const HOST = "127.0.0.1";

/** PgBouncer's settings: transaction pooling, trust auth, a pool small enough to share. */
function pgbouncerConfig(listenPort: number, serverPort: number, dir: string): string {
  return [
    "[databases]",
    `postgres = host=${HOST} port=${serverPort} dbname=postgres user=postgres`,
    "",
    "[pgbouncer]",
    `listen_addr = ${HOST}`,
    `listen_port = ${listenPort}`,
    "unix_socket_dir =",
    "auth_type = trust",
    `auth_file = ${join(dir, "userlist.txt")}`,
    "pool_mode = transaction",
    "max_client_conn = 1000",
    "default_pool_size = 20",
    "admin_users = postgres",
    "ignore_startup_parameters = extra_float_digits,options",
    `pidfile = ${join(dir, "pgbouncer.pid")}`,
    "",
  ].join("\n");
}

/**
 * Starts one PostgreSQL server and PgBouncer 1.x in front of it in transaction pooling mode
 * (`pool_mode = transaction`, 20 server connections), both on free loopback ports. The URL
 * handed to tests is PgBouncer's, with `?locks=lease`:
 * `postgres://postgres@127.0.0.1:B/postgres?locks=lease`. Member 0 is the server, member 1
 * PgBouncer.
 *
 * As root both run as the `postgres` user (PgBouncer, like PostgreSQL, refuses root).
 *
 * @throws ServerStartError (with log tails) when either fails to start
 */
export async function startPostgresBehindPgBouncer(
  options: LocalStartOptions,
): Promise<ServerGroup> {
  const pgbouncer = requirePgBouncer(options.env);
  const pg = await initPostgres(options, "pg-behind-pgbouncer");
  return withPortRetry(async () => {
    const serverPort = await freePort(HOST);
    const listenPort = await freePort(HOST);
    const config = join(pg.dir, "pgbouncer.ini");
    await writeFile(config, pgbouncerConfig(listenPort, serverPort, pg.dir));
    await writeFile(join(pg.dir, "userlist.txt"), '"postgres" ""\n');
    if (pg.runAsUser !== undefined) {
      const user = lookupUser(pg.runAsUser);
      if (user !== undefined) {
        await chown(config, user.uid, user.gid);
        await chown(join(pg.dir, "userlist.txt"), user.uid, user.gid);
      }
    }
    return startServerGroup({
      kind: "postgres-lease",
      what: "postgres server behind pgbouncer",
      url: `postgres://postgres@${HOST}:${listenPort}/postgres?locks=lease`,
      members: [
        postgresMember(pg, serverPort),
        {
          name: "pgbouncer",
          address: `${HOST}:${listenPort}`,
          ports: { client: listenPort },
          dataDir: pg.dir,
          spec: {
            name: "pgbouncer",
            command: pgbouncer,
            args: [config],
            cwd: pg.dir,
            logFile: join(pg.dir, "pgbouncer.log"),
            ...(pg.runAsUser === undefined ? {} : { runAsUser: pg.runAsUser }),
            stopSignal: "SIGINT",
            programs: ["pgbouncer"],
          },
          // Through PgBouncer, so ready only once PgBouncer reaches the server.
          isReady: () => pgIsReady(pg.binDir, HOST, listenPort),
        },
      ],
      timeoutMs: pg.timeoutMs,
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    });
  });
}
