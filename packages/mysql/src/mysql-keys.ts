import { createHash } from "node:crypto";

/**
 * Every name Baton writes in a MySQL or MariaDB server, built here: its tables (one prefix, in
 * the connection's database) and the names of its named locks (`GET_LOCK`).
 */

/** The quoted names of Baton's tables, safe to put in SQL text. */
export interface TableNames {
  /** The counter table: one row ({@link TOKEN_ROW}) whose `value` is the last token handed out. */
  readonly tokens: string;
  /** Row leases: one row per held lock (namespace, name), naming its session. */
  readonly leases: string;
  /** Row-lease sessions: one row per Baton session with its expiry on the server's clock. */
  readonly leaseSessions: string;
  /** Forced releases of row leases, read by the holder's renewal. */
  readonly leaseRevocations: string;
  /** Durable records for `runOnce` and `schedule`. */
  readonly records: string;
  /** Named-lock mode: who holds which named lock (one row per `GET_LOCK` name). */
  readonly holders: string;
}

/** The id of the one row of the counter table. */
export const TOKEN_ROW = 1;

/** The quoted table names for `prefix` (checked by the options: letters, digits, `_`). */
export function tableNames(prefix: string): TableNames {
  const quote = (table: string) => `\`${prefix}${table}\``;
  return {
    tokens: quote("tokens"),
    leases: quote("leases"),
    leaseSessions: quote("lease_sessions"),
    leaseRevocations: quote("lease_revocations"),
    records: quote("records"),
    holders: quote("holders"),
  };
}

/** The server's limit on a `GET_LOCK` name (MySQL 5.7 and later: 64 characters). */
export const GET_LOCK_NAME_MAX = 64;

/** Lock names put in a `GET_LOCK` name as they are: the same on every server and collation. */
const PLAIN_NAME = /^[a-z0-9._:/-]+$/;

/** Hex digits of the SHA-256 digest in a hashed `GET_LOCK` name: 160 bits. */
const HASH_HEX_DIGITS = 40;

/**
 * The `GET_LOCK` name of lock `name` in `namespace` (1 to 20 of `[a-z0-9_.-]`, checked by the
 * options): at most {@link GET_LOCK_NAME_MAX} characters, all ASCII, and a different one for
 * every (namespace, name).
 *
 * - `namespace:name` when the name is lower-case letters, digits and `.`, `_`, `:`, `/`, `-`
 *   and the whole fits in 64 characters. Such a name means the same lock whether the server
 *   compares `GET_LOCK` names by bytes or ignoring case, and it reads as the lock in
 *   `SHOW PROCESSLIST` and `performance_schema.metadata_locks`.
 * - otherwise `namespace#` and the first 40 hex digits of the SHA-256 of
 *   `namespace`, a NUL, and `name` in UTF-8 (61 characters at most). Upper-case letters, other
 *   characters and long names go this way.
 *
 * The two forms never meet: the namespace has neither `:` nor `#`, so the character after it
 * tells the forms apart, and the plain form's rest is the name itself. Two hashed names meet
 * only if SHA-256 truncated to 160 bits collides.
 */
export function getLockName(namespace: string, name: string): string {
  const plain = `${namespace}:${name}`;
  if (plain.length <= GET_LOCK_NAME_MAX && PLAIN_NAME.test(name)) return plain;
  const digest = createHash("sha256").update(`${namespace}\0${name}`, "utf8").digest("hex");
  return `${namespace}#${digest.slice(0, HASH_HEX_DIGITS)}`;
}
