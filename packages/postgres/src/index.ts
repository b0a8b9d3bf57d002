/**
 * `@baton/postgres`: Baton's PostgreSQL backend (advisory locks made into leases, sequence
 * fencing tokens) and the fenced store `pgFence`. Importing it registers `postgres://` and
 * `postgresql://`.
 *
 * @packageDocumentation
 * @module @baton/postgres
 */
import { registerBackend } from "@baton/core";
import { POSTGRES_GUARANTEES, PostgresBackend } from "./postgres-backend.js";
import { postgresOptionsFromUrl } from "./postgres-options.js";

export { PgFence, pgFence } from "./pg-fence.js";
export type { PgFenceOptions } from "./pg-fence-options.js";
export type {
  PgClientLike,
  PgConnectionConfig,
  PgPoolLike,
  PgResultLike,
  Queryable,
} from "./pg-shapes.js";
export {
  POSTGRES_GUARANTEES,
  POSTGRES_LEASE_GUARANTEES,
  PostgresBackend,
} from "./postgres-backend.js";
export { advisoryKey } from "./postgres-keys.js";
export {
  DEFAULT_LOCKS,
  DEFAULT_MIGRATE,
  DEFAULT_NAMESPACE,
  DEFAULT_POOL_SIZE,
  DEFAULT_SCHEMA,
  type PostgresBackendOptions,
  type PostgresLockMode,
  postgresOptionsFromUrl,
} from "./postgres-options.js";
export { type MigrateOptions, migrate } from "./schema.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("postgres", (url) => new PostgresBackend(postgresOptionsFromUrl(url)), {
  checkUrl: postgresOptionsFromUrl,
  guarantees: POSTGRES_GUARANTEES,
});
registerBackend("postgresql", (url) => new PostgresBackend(postgresOptionsFromUrl(url)), {
  checkUrl: postgresOptionsFromUrl,
  guarantees: POSTGRES_GUARANTEES,
});
