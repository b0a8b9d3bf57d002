/**
 * `@baton/postgres`: Baton's PostgreSQL backend (advisory locks made into leases, sequence
 * fencing tokens) and the fenced store `pgFence`. Importing it registers `postgres://` and
 * `postgresql://`.
 *
 * @packageDocumentation
 * @module @baton/postgres
 */
import { type BackendUrl, registerBackend } from "@baton/core";
import { POSTGRES_GUARANTEES, PostgresBackend } from "./postgres-backend.js";
import { checkPostgresUrl } from "./postgres-options.js";

export { advisoryKey } from "./advisory-key.js";
export { PgFence, pgFence } from "./pg-fence.js";
export type { PgFenceOptions } from "./pg-fence-options.js";
export { POSTGRES_GUARANTEES, PostgresBackend } from "./postgres-backend.js";
export type { PostgresBackendOptions } from "./postgres-options.js";
export { type MigrateOptions, migrate, type Queryable } from "./schema.js";

function fromUrl(url: BackendUrl): PostgresBackend {
  return new PostgresBackend({ url: url.href });
}

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
const postgres = { checkUrl: checkPostgresUrl, guarantees: POSTGRES_GUARANTEES };
registerBackend("postgres", fromUrl, postgres);
registerBackend("postgresql", fromUrl, postgres);
