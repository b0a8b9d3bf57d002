/**
 * `@baton/mysql`: Baton's MySQL and MariaDB backend (named locks made into leases, or row
 * leases for pools, proxies and Galera; counter-table fencing tokens). Importing it registers
 * `mysql://` and `mariadb://`.
 *
 * @packageDocumentation
 * @module @baton/mysql
 */
import { registerBackend } from "@baton/core";
import { MYSQL_ROW_LEASE_GUARANTEES, MysqlBackend } from "./mysql-backend.js";
import { mysqlOptionsFromUrl } from "./mysql-options.js";

export {
  MYSQL_GUARANTEES,
  MYSQL_ROW_LEASE_GUARANTEES,
  MysqlBackend,
} from "./mysql-backend.js";
export {
  MysqlFence,
  type MysqlFenceCallbackPool,
  type MysqlFenceConnection,
  type MysqlFencePool,
  mysqlFence,
} from "./mysql-fence.js";
export type { MysqlFenceOptions } from "./mysql-fence-options.js";
export type { MysqlFenceQueryable } from "./mysql-fence-table.js";
export { GET_LOCK_NAME_MAX, getLockName } from "./mysql-keys.js";
export {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_MIGRATE,
  DEFAULT_MODE,
  DEFAULT_NAMESPACE,
  DEFAULT_PORT,
  DEFAULT_TABLE_PREFIX,
  type MysqlBackendOptions,
  type MysqlLockMode,
  mysqlOptionsFromUrl,
} from "./mysql-options.js";
export type {
  MysqlCallbackQueryable,
  MysqlConnectionConfig,
  MysqlCorePoolLike,
  MysqlPoolLike,
  MysqlPromiseConnectionLike,
  MysqlPromisePoolLike,
  MysqlQueryable,
  MysqlQueryOptions,
} from "./mysql-shapes.js";
export { type MigrateOptions, migrate } from "./schema.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
// A scheme serves both modes, so it is registered with what either may give: the row-lease
// mode's guarantees, which add inspection and forced release to the named-lock mode's (the
// same fencing, records and no semaphores). Core checks the backend's own guarantees once it
// is built from the URL, still before any I/O, so a named-lock URL is refused list(), inspect()
// and forceRelease() all the same.
registerBackend("mysql", (url) => new MysqlBackend(mysqlOptionsFromUrl(url)), {
  checkUrl: mysqlOptionsFromUrl,
  guarantees: MYSQL_ROW_LEASE_GUARANTEES,
});
registerBackend("mariadb", (url) => new MysqlBackend(mysqlOptionsFromUrl(url)), {
  checkUrl: mysqlOptionsFromUrl,
  guarantees: MYSQL_ROW_LEASE_GUARANTEES,
});
