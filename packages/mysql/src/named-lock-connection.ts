import { ConfigError } from "@baton/core";
import mysql from "mysql2";
import type { MysqlConnectionConfig } from "./mysql-shapes.js";

/**
 * The connections of the named-lock mode: opening one with the settings the mode needs,
 * refusing a server or a path on which a named lock does not mean one lock, running a
 * statement, and ending a connection in bounded time.
 */

/** A mysql2 connection (callback API). */
export type Connection = mysql.Connection;

/** How long a connection gets to end politely before its socket is destroyed. */
export const END_BOUND_MS = 500;

/**
 * How long a connection may take to be made unless the settings give `connectTimeout`: below
 * the shortest bound core puts on opening a session (5 s), so that a server that accepts
 * connections and never answers fails the open with an error that names it.
 */
export const CONNECT_TIMEOUT_MS = 4_000;

/** How to reach the row-lease mode, named in every refusal of the named-lock mode. */
export const LEASE_MODE_HINT =
  'use the row-lease mode (mode: "row-lease", or ?mode=row-lease in the URL), which keeps each lock in a row with an expiry on the server\'s clock';

/** What mysql2 reports for a statement that changed rows. */
export interface Changed {
  readonly affectedRows: number;
  readonly insertId: number | string;
}

/** Runs `sql` with `values` on `connection`: its result (rows, or a list per statement). */
export function run(connection: Connection, sql: string, values: unknown[] = []): Promise<unknown> {
  return new Promise((resolve, reject) => {
    connection.query(
      { sql, values, supportBigNumbers: true, bigNumberStrings: true },
      (error, result) => {
        if (error) reject(error);
        else resolve(result);
      },
    );
  });
}

/** A new connection (not yet connected) with `settings`, several statements per call allowed. */
export function newConnection(settings: MysqlConnectionConfig): Connection {
  return mysql.createConnection({
    // MysqlConnectionConfig describes mysql2's ConnectionOptions by shape.
    ...(settings as mysql.ConnectionOptions),
    charset: "UTF8MB4_GENERAL_CI",
    connectTimeout: settings.connectTimeout ?? CONNECT_TIMEOUT_MS,
    multipleStatements: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}

/** Connects `connection`; rejects with mysql2's error. */
export function connect(connection: Connection): Promise<void> {
  return new Promise((resolve, reject) => {
    connection.connect((error) => {
      if (error) reject(error);
      else resolve();
    });
  });
}

/** Ends `connection` politely, then, if that has not finished within `boundMs`, destroys it. */
export async function endConnection(connection: Connection, boundMs = END_BOUND_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    new Promise<void>((resolve) => {
      try {
        connection.end(() => resolve());
      } catch {
        resolve();
      }
    }),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, boundMs);
    }),
  ]);
  clearTimeout(timer);
  connection.destroy();
}

/** The server's connection id, as one statement sees it. */
async function connectionId(connection: Connection): Promise<number> {
  const rows = (await run(connection, "SELECT CONNECTION_ID() AS id")) as { id: unknown }[];
  return Number(rows[0]?.id);
}

/**
 * Refuses (with a `ConfigError` on `url` that names the row-lease mode) a server or a path on
 * which a named lock held by this connection is not one lock held by this connection:
 *
 * - a Galera cluster node (`wsrep_on` is ON): `GET_LOCK` is local to the node, so clients of
 *   two nodes could both hold one name;
 * - a proxy or pooler between the client and the server (ProxySQL, MaxScale, a pool in
 *   statement mode): the connection id the handshake gave differs from the server's
 *   `CONNECTION_ID()`, or `CONNECTION_ID()` changes between statements, so the statements of
 *   one session may run on server connections that are not its own.
 *
 * `where` names the server in the message.
 */
export async function refuseUnsafePath(connection: Connection, where: string): Promise<void> {
  const wsrep = (await run(connection, "SHOW VARIABLES LIKE 'wsrep_on'")) as {
    Value?: unknown;
  }[];
  if (String(wsrep[0]?.Value ?? "OFF").toUpperCase() === "ON") {
    throw new ConfigError(
      "url",
      `${where} is a Galera cluster node (wsrep_on is ON): a named lock (GET_LOCK) is held on one node only, so clients of two nodes could hold the same lock; ${LEASE_MODE_HINT}`,
    );
  }
  const first = await connectionId(connection);
  const second = await connectionId(connection);
  const handshake = connection.threadId;
  if (first !== second || (handshake !== null && handshake !== undefined && handshake !== first)) {
    const seen =
      first !== second
        ? `one connection was served by server connection ${first}, then ${second}`
        : `the handshake gave connection id ${handshake} but the server runs the statements on connection ${first}`;
    throw new ConfigError(
      "url",
      `${where} is reached through a proxy or a pooler (such as ProxySQL or MaxScale): ${seen}, and a named lock (GET_LOCK) belongs to the server connection that took it; ${LEASE_MODE_HINT}, or connect to the server directly`,
    );
  }
}
