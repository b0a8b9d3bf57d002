import { ConfigError } from "@baton/core";
import { ER, errorNumber } from "./mysql-errors.js";
import { type TableNames, TOKEN_ROW, tableNames } from "./mysql-keys.js";
import { DEFAULT_TABLE_PREFIX } from "./mysql-options.js";
import {
  callbackQueryable,
  type MysqlCallbackQueryable,
  type MysqlQueryable,
} from "./mysql-shapes.js";

export type { MysqlQueryable } from "./mysql-shapes.js";

/**
 * The server's clock in microseconds since 1970 (UTC, whatever the connection's time zone):
 * where a new token counter starts, and what every record version is at least.
 */
export const SERVER_MICROS = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/**
 * Baton's tables, each created only when missing. Names and keys that are compared are
 * `VARBINARY` (UTF-8 bytes): compared byte by byte, so with no trailing-space padding and no
 * case folding whatever the server's collations, and ordered by code point. Text that is only
 * stored is `utf8mb4`.
 */
function ddl(names: TableNames): string[] {
  const table = "ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin";
  return [
    // One row: the last token handed out. A counter made again after its table was dropped
    // starts at the server's clock in microseconds, above every token of the one before (as
    // long as the clock did not go back and fewer than one token per microsecond was taken).
    `CREATE TABLE IF NOT EXISTS ${names.tokens} (
      id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
      value BIGINT UNSIGNED NOT NULL
    ) ${table}`,
    `INSERT IGNORE INTO ${names.tokens} (id, value) VALUES (${TOKEN_ROW}, ${SERVER_MICROS})`,
    // Row leases: a session's expiry on the server's clock (UTC), renewed by one statement.
    `CREATE TABLE IF NOT EXISTS ${names.leaseSessions} (
      id VARBINARY(64) NOT NULL PRIMARY KEY,
      owner VARCHAR(256) NOT NULL,
      ttl_ms INT UNSIGNED NOT NULL,
      expires_at DATETIME(3) NOT NULL,
      KEY expires_at (expires_at)
    ) ${table}`,
    `CREATE TABLE IF NOT EXISTS ${names.leases} (
      namespace VARBINARY(80) NOT NULL,
      name VARBINARY(1024) NOT NULL,
      session VARBINARY(64) NOT NULL,
      owner VARCHAR(256) NOT NULL,
      token BIGINT UNSIGNED NOT NULL,
      value MEDIUMTEXT NULL,
      granted_at DATETIME(3) NOT NULL,
      PRIMARY KEY (namespace, name),
      KEY session (session)
    ) ${table}`,
    `CREATE TABLE IF NOT EXISTS ${names.leaseRevocations} (
      session VARBINARY(64) NOT NULL,
      token BIGINT UNSIGNED NOT NULL,
      name VARBINARY(1024) NOT NULL,
      reason VARCHAR(1024) NOT NULL,
      PRIMARY KEY (session, token)
    ) ${table}`,
    // Records never expire and are never deleted by Baton.
    `CREATE TABLE IF NOT EXISTS ${names.records} (
      namespace VARBINARY(80) NOT NULL,
      record_key VARBINARY(2048) NOT NULL,
      value MEDIUMTEXT NOT NULL,
      version BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (namespace, record_key)
    ) ${table}`,
    // The named-lock mode: who holds which named lock, one row per GET_LOCK name.
    `CREATE TABLE IF NOT EXISTS ${names.holders} (
      lock_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
      name VARCHAR(1024) NOT NULL,
      connection_id BIGINT UNSIGNED NOT NULL,
      owner_id VARCHAR(1024) NOT NULL,
      token BIGINT UNSIGNED NOT NULL,
      value MEDIUMTEXT NULL
    ) ${table}`,
  ];
}

/** The unquoted names of every table of `names`, as `information_schema` spells them. */
function bareNames(names: TableNames): string[] {
  return Object.values(names).map((quoted) => quoted.slice(1, -1));
}

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Prefix of Baton's table names. Default `baton_` (see `MysqlBackendOptions.tablePrefix`). */
  readonly tablePrefix?: string;
}

/**
 * Creates Baton's tables in the connection's database when missing: `baton_tokens` (the token
 * counter, one row), `baton_lease_sessions`, `baton_leases` and `baton_lease_revocations` (the
 * row-lease mode), `baton_records` (`runOnce` and `schedule`) and `baton_holders` (the
 * named-lock mode). Idempotent and safe to run concurrently. Run it with a user that may create
 * tables when the application's may not; the application's user then needs SELECT, INSERT,
 * UPDATE and DELETE on them.
 *
 * @param db - a `mysql2` pool or connection (callback or promise API) on the database
 */
export async function migrate(db: MysqlQueryable, options: MigrateOptions = {}): Promise<void> {
  const prefix = options.tablePrefix ?? DEFAULT_TABLE_PREFIX;
  if (typeof prefix !== "string" || !/^[A-Za-z0-9_]{0,32}$/.test(prefix)) {
    throw new ConfigError(
      "tablePrefix",
      `must be letters, digits and "_", at most 32, got ${JSON.stringify(prefix)}`,
    );
  }
  await ensureSchema(callbackQueryable(db), tableNames(prefix), true);
}

/** Runs one statement with mysql2's callback API. */
export function runStatement(
  db: MysqlCallbackQueryable,
  sql: string,
  values: unknown[] = [],
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    db.query({ sql, values, supportBigNumbers: true, bigNumberStrings: true }, (error, result) => {
      if (error) reject(error);
      else resolve(result);
    });
  });
}

/**
 * Checks that Baton's tables exist in the connection's database, creating them when `create`
 * and some are missing. A missing database, or missing privileges, become a `ConfigError`
 * saying which.
 */
export async function ensureSchema(
  db: MysqlCallbackQueryable,
  names: TableNames,
  create: boolean,
): Promise<void> {
  const wanted = bareNames(names);
  const rows = (await runStatement(
    db,
    `SELECT DATABASE() AS db, CURRENT_USER() AS who,
      (SELECT COUNT(*) FROM information_schema.tables
        WHERE table_schema = DATABASE() AND table_name IN (?)) AS found`,
    [wanted],
  )) as { db: string | null; who: string; found: number | string }[];
  const row = rows[0];
  if (row === undefined || row.db === null) {
    throw new ConfigError("url", "the connection has no database; name one (mysql://host/mydb)");
  }
  if (Number(row.found) === wanted.length) return;
  if (!create) {
    throw new ConfigError(
      "schema",
      `Baton's tables are missing in database "${row.db}" and migrate is false; run migrate() once`,
    );
  }
  try {
    for (const statement of ddl(names)) await runStatement(db, statement);
  } catch (error) {
    const errno = errorNumber(error);
    if (errno === ER.tableAccessDenied || errno === ER.dbAccessDenied) {
      throw new ConfigError(
        "privileges",
        `user ${row.who} may not create Baton's tables in database "${row.db}" (${(error as Error).message}); grant it CREATE there, or run migrate() once as a user that may`,
        { cause: error },
      );
    }
    throw error;
  }
}
