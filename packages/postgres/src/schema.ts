import { ConfigError } from "@baton/core";
import { permitFunctions } from "./permit-functions.js";
import type { Queryable } from "./pg-shapes.js";
import { isPrivilegeError, SQLSTATE, sqlState } from "./postgres-errors.js";
import { MIGRATION_KEY, type SchemaNames, schemaNames } from "./postgres-keys.js";
import { quoteIdentifier } from "./sql-identifier.js";

export type { Queryable } from "./pg-shapes.js";

/**
 * The token sequence, when missing, starts at the server's clock in microseconds
 * (`clock_timestamp()`), not at 1: one created again after its schema was dropped hands out
 * tokens above every token of the one before, as long as the server's clock did not go back
 * and that one handed out fewer than one token per microsecond on average since it was
 * created. An existing sequence keeps counting. `START WITH` takes a constant only, hence the
 * dynamic statement; the name goes in as a quoted literal.
 */
function createSequence(names: SchemaNames): string {
  const name = names.tokens.replaceAll("'", "''");
  return `DO $baton$ BEGIN
  EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %s AS bigint START WITH %s', '${name}',
    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
END $baton$`;
}

/**
 * Creates the schema only when it is missing: `CREATE SCHEMA IF NOT EXISTS` checks for CREATE
 * on the database before it looks, so it would fail for a role that may create tables in an
 * existing schema (CREATE on the schema) but not schemas.
 */
function createSchema(names: SchemaNames): string {
  const name = names.schema.replaceAll("'", "''");
  return `DO $baton$ BEGIN
  IF to_regnamespace('${name}') IS NULL THEN
    CREATE SCHEMA IF NOT EXISTS ${names.schema};
  END IF;
END $baton$`;
}

/**
 * Adds the sessions' TTL column (holder()'s time left) to a table made before it had one.
 * Only its owner may: for another role (one with CREATE on the schema, adding a missing
 * table) this does nothing, and locks work without it.
 */
function addSessionTtl(names: SchemaNames): string {
  const table = names.sessions.replaceAll("'", "''");
  return `DO $baton$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass('${table}')
      AND a.attname = 'ttl_ms' AND NOT a.attisdropped) THEN
    BEGIN
      ALTER TABLE ${names.sessions} ADD COLUMN IF NOT EXISTS ttl_ms integer;
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
  END IF;
END $baton$`;
}

/**
 * Adds the leases' grant time (inspection's `heldMs`) to a table made before it had one:
 * nullable, its default set apart, so no existing row is rewritten. Only its owner may: for
 * another role this does nothing, and inspection tells no `heldMs`.
 */
function addGrantTime(names: SchemaNames): string {
  const table = names.leases.replaceAll("'", "''");
  return `DO $baton$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass('${table}')
      AND a.attname = 'granted_at' AND NOT a.attisdropped) THEN
    BEGIN
      ALTER TABLE ${names.leases} ADD COLUMN IF NOT EXISTS granted_at timestamptz;
      ALTER TABLE ${names.leases} ALTER COLUMN granted_at SET DEFAULT clock_timestamp();
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
  END IF;
END $baton$`;
}

function ddl(names: SchemaNames): string {
  return [
    "BEGIN",
    `SELECT pg_advisory_xact_lock(${MIGRATION_KEY})`,
    createSchema(names),
    createSequence(names),
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${names.holders} (
      key bigint PRIMARY KEY,
      name text NOT NULL,
      owner text NOT NULL,
      token bigint NOT NULL,
      value text,
      pid integer NOT NULL
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${names.sessions} (
      pid integer PRIMARY KEY,
      owner text NOT NULL,
      ttl_ms integer
    )`,
    addSessionTtl(names),
    // Logged: records must survive a crash. Keys compare byte by byte ("C"), whatever the
    // database's collation, so an operating system's collation update cannot disturb them.
    `CREATE TABLE IF NOT EXISTS ${names.records} (
      key text COLLATE "C" PRIMARY KEY,
      value text NOT NULL,
      version bigint NOT NULL
    )`,
    // Row leases (locks: "lease"): logged, so a crash of the server frees no lock early; a
    // session's rows go with it (ON DELETE CASCADE) when it ends or is reaped after expiry.
    `CREATE TABLE IF NOT EXISTS ${names.leaseSessions} (
      id text COLLATE "C" PRIMARY KEY,
      owner text NOT NULL,
      ttl interval NOT NULL,
      expires_at timestamptz NOT NULL
    )`,
    `CREATE TABLE IF NOT EXISTS ${names.leases} (
      namespace text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      session text COLLATE "C" NOT NULL REFERENCES ${names.leaseSessions} (id) ON DELETE CASCADE,
      owner text NOT NULL,
      token bigint NOT NULL,
      value text,
      granted_at timestamptz DEFAULT clock_timestamp(),
      PRIMARY KEY (namespace, name),
      -- Its index finds a session's leases (the cascade when it ends), declared inline: a
      -- CREATE INDEX of its own would need the table's owner on every later migration.
      UNIQUE (session, namespace, name)
    )`,
    addGrantTime(names),
    // Permits (semaphores, read-write locks) of the advisory mode: see permit-functions.ts.
    ...permitFunctions(names).ddl,
    // Inspection and forced release (postgres-inspection.ts). Unlogged where they describe
    // connections, which a crash of the server ends; the lease mode's go with their session.
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${names.lockNames} (
      pid integer NOT NULL,
      key bigint NOT NULL,
      namespace text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      PRIMARY KEY (pid, key),
      UNIQUE (namespace, name, pid)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${names.revocations} (
      pid integer NOT NULL,
      token bigint NOT NULL,
      key bigint NOT NULL,
      reason text NOT NULL,
      name text,
      PRIMARY KEY (pid, token)
    )`,
    `CREATE TABLE IF NOT EXISTS ${names.leaseRevocations} (
      session text COLLATE "C" NOT NULL REFERENCES ${names.leaseSessions} (id) ON DELETE CASCADE,
      token bigint NOT NULL,
      name text COLLATE "C" NOT NULL,
      reason text NOT NULL,
      PRIMARY KEY (session, token)
    )`,
    "COMMIT",
  ].join(";\n");
}

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Schema to create Baton's objects in. Default `baton`. */
  readonly schema?: string;
}

/**
 * Creates Baton's schema, its tables (`holders`, `sessions`, `records`, `permits`,
 * `permit_queues` and `permit_tokens` with their functions, `leases` and
 * `lease_sessions` for the row-lease mode, and `lock_names`, `revocations` and
 * `lease_revocations` for inspection and forced release) and token sequence when missing. Idempotent and
 * safe to run concurrently. Run it with a role that may create them when the application's
 * role may not (then grant the application's role USAGE on the
 * schema; SELECT, INSERT, UPDATE, DELETE on `holders` and `sessions`; SELECT, INSERT, UPDATE
 * on `records`; for semaphores and read-write locks SELECT, INSERT, UPDATE, DELETE on
 * `permits`, `permit_queues` and `permit_tokens` (functions may be run by every role
 * unless revoked); for the row-lease mode SELECT, INSERT, UPDATE, DELETE on `leases` and
 * `lease_sessions`; for inspection and forced release SELECT, INSERT, UPDATE, DELETE on
 * `lock_names` and `revocations` (advisory mode) or `lease_revocations` (row leases); USAGE
 * on the sequence).
 */
export async function migrate(db: Queryable, options: MigrateOptions = {}): Promise<void> {
  const names = schemaNames(quoteIdentifier(options.schema ?? "baton", "schema"));
  await ensureSchema(db, names, options.schema ?? "baton", true);
}

/**
 * Checks that Baton's objects exist, creating them when `create` and they are missing.
 * Missing privileges become a `ConfigError` (field `privileges`) saying which. Locks do not
 * need the records table, nor the permit tables and functions: with `recordsOptional`, when
 * only they are missing and cannot be created here (`create` is false, or the role may not),
 * this returns, locks work, and the records' (and permits') statements fail saying to run
 * `migrate()` (see postgres-records.ts, postgres-permits.ts). The same holds for the
 * `sessions` table's `ttl_ms` column (added by a later release): without it locks work and
 * holder() tells no time left; the result says whether it is there. `locks` names
 * which lock tables must be there: the advisory mode's or the row-lease mode's.
 */
export async function ensureSchema(
  db: Queryable,
  names: SchemaNames,
  schema: string,
  create: boolean,
  recordsOptional = false,
  locks: "advisory" | "lease" = "advisory",
): Promise<SchemaState> {
  let who: { user: string; database: string; ready: boolean; ttl: boolean; operations: boolean };
  try {
    const probe = await db.query(
      `SELECT current_user AS "user", current_database() AS database,
        to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL
          AND to_regclass($3) IS NOT NULL AS ready, to_regclass($4) IS NOT NULL AS records,
        (SELECT bool_and(to_regclass(o) IS NOT NULL) FROM unnest($5::text[]) o)
          AND (SELECT bool_and(to_regproc(f) IS NOT NULL) FROM unnest($6::text[]) f) AS permits,
        EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass($7)
          AND a.attname = 'ttl_ms' AND NOT a.attisdropped) AS ttl,
        (SELECT bool_and(to_regclass(o) IS NOT NULL) FROM unnest($8::text[]) o) AS operations`,
      [
        ...(locks === "lease"
          ? [names.leases, names.tokens, names.leaseSessions, names.records]
          : [names.holders, names.tokens, names.sessions, names.records]),
        [names.permits, names.permitQueues, names.permitTokens],
        permitFunctions(names).names.all,
        names.sessions,
        [names.lockNames, names.revocations, names.leaseRevocations],
      ],
    );
    const row = probe.rows[0] as {
      user: string;
      database: string;
      ready: boolean;
      records: boolean;
      permits: boolean;
      ttl: boolean;
      operations: boolean;
    };
    // The row-lease mode does not use the sessions table.
    const ttl = row.ttl || locks === "lease";
    if (
      row.ready &&
      ((row.records && row.permits && ttl && row.operations) || (recordsOptional && !create))
    ) {
      return { sessionTtl: row.ttl, operations: row.operations };
    }
    who = row;
  } catch (error) {
    if (isPrivilegeError(error)) {
      throw new ConfigError(
        "privileges",
        `the role may not use schema "${schema}" (${(error as Error).message}); grant it USAGE on the schema`,
        { cause: error },
      );
    }
    throw error;
  }
  if (!create) {
    throw new ConfigError(
      "schema",
      `Baton's objects are missing in schema "${schema}" and migrate is false; run migrate() once`,
    );
  }
  try {
    await db.query(ddl(names));
  } catch (error) {
    // A failed simple-query transaction is rolled back by the server.
    if (isPrivilegeError(error)) {
      // Only the records or permit objects, or the sessions' TTL column, are missing.
      if (who.ready && recordsOptional) return { sessionTtl: who.ttl, operations: who.operations };
      throw new ConfigError(
        "privileges",
        `role "${who.user}" may not create Baton's objects in schema "${schema}" of database "${who.database}" (${(error as Error).message}); it needs CREATE on the database (for the schema) or on the schema, or run migrate() once as a role that has it`,
        { cause: error },
      );
    }
    // A concurrent creator won a race on the catalog.
    if (sqlState(error) === SQLSTATE.uniqueViolation)
      return { sessionTtl: await hasTtl(db, names), operations: true };
    throw error;
  }
  // The column is added only by the table's owner.
  return { sessionTtl: locks === "lease" || (await hasTtl(db, names)), operations: true };
}

/** Whether the sessions table has its TTL column. */
async function hasTtl(db: Queryable, names: SchemaNames): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass($1)
      AND a.attname = 'ttl_ms' AND NOT a.attisdropped) AS ttl`,
    [names.sessions],
  );
  return (rows[0] as { ttl: boolean } | undefined)?.ttl === true;
}

/** What {@link ensureSchema} found. */
export interface SchemaState {
  /**
   * The sessions table records each session's TTL (a schema made by an older release lacks
   * the column until `migrate()` runs again): holder() then tells the holder's time left.
   */
  readonly sessionTtl: boolean;
  /**
   * The tables of inspection and forced release are there (a schema made by an older release
   * lacks them until `migrate()` runs again): without them locks work, renewals read no
   * revocations, and listing, inspecting or force-releasing fails saying to run `migrate()`.
   */
  readonly operations: boolean;
}
