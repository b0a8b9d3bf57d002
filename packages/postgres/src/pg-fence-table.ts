import { ConfigError } from "@baton/core";
import type { ResolvedPgFenceOptions } from "./pg-fence-options.js";
import { isPrivilegeError, SQLSTATE, sqlState, toBatonError } from "./postgres-errors.js";
import type { Queryable } from "./schema.js";

/** One column of the fence table as `pg_catalog` describes it. */
interface ColumnRow {
  readonly kind: string;
  readonly name: string;
  readonly type: string;
  readonly category: string;
  readonly not_null: boolean;
  readonly defaulted: boolean;
  readonly unique_key: boolean;
}

const COLUMNS = `SELECT c.relkind::text AS kind, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
  t.typcategory::text AS category, a.attnotnull AS not_null,
  (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') AS defaulted,
  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique AND i.indnkeyatts = 1
    AND i.indkey[0] = a.attnum AND i.indpred IS NULL AND i.indexprs IS NULL) AS unique_key
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
WHERE c.oid = to_regclass($1)
ORDER BY a.attnum`;

/** Token column types that hold every 64-bit token. */
const TOKEN_TYPES = new Set(["bigint", "numeric"]);

/**
 * Creates the fence table when missing, then checks that the table (the user's own, or one
 * created by another process) has what the fence's statements need, so a mismatch is a
 * `ConfigError` naming the option at first use, not a raw SQL error at the first write.
 */
export async function prepareFenceTable(db: Queryable, o: ResolvedPgFenceOptions): Promise<void> {
  let columns = await readColumns(db, o);
  if (columns.length === 0) {
    await createFenceTable(db, o);
    columns = await readColumns(db, o);
  }
  checkFenceTable(columns, o);
}

async function readColumns(db: Queryable, o: ResolvedPgFenceOptions): Promise<ColumnRow[]> {
  try {
    return (await db.query(COLUMNS, [o.table])).rows as ColumnRow[];
  } catch (error) {
    // to_regclass names a missing schema in no error; anything here is the connection.
    throw toBatonError(error, `could not read the fence table ${o.table}`);
  }
}

function createStatement(o: ResolvedPgFenceOptions): string {
  return `CREATE TABLE ${o.table} (${o.resource} text PRIMARY KEY, ${o.token} bigint NOT NULL)`;
}

async function createFenceTable(db: Queryable, o: ResolvedPgFenceOptions): Promise<void> {
  const dot = o.table.indexOf('"."');
  const schema = dot >= 0 ? o.table.slice(0, dot + 1) : undefined;
  const ddl = [
    "BEGIN",
    // Serialise concurrent creators (the key is SHA-256 of "baton:fence").
    "SELECT pg_advisory_xact_lock(-1790974060622371838)",
    ...(schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS ${schema}`]),
    createStatement(o).replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"),
    "COMMIT",
  ].join(";\n");
  try {
    await db.query(ddl);
  } catch (error) {
    if (sqlState(error) === SQLSTATE.uniqueViolation) return; // a concurrent creator won
    if (isPrivilegeError(error)) {
      throw new ConfigError(
        "privileges",
        `may not create the fence table ${o.table} (${(error as Error).message}); create it once as a privileged role: ${createStatement(o)}`,
        { cause: error },
      );
    }
    throw toBatonError(error, `could not create the fence table ${o.table}`);
  }
}

function checkFenceTable(columns: readonly ColumnRow[], o: ResolvedPgFenceOptions): void {
  const where = `the fence table ${o.table}`;
  const kind = columns[0]?.kind;
  if (kind !== "r" && kind !== "p") {
    throw new ConfigError("table", `${where} is not a table (a view or another relation)`);
  }
  const names = columns.map((c) => c.name).join(", ");
  const find = (name: string, option: string): ColumnRow => {
    const column = columns.find((c) => c.name === name);
    if (column === undefined) {
      throw new ConfigError(
        option,
        `${where} has no column "${name}" (its columns: ${names}); name the right one with ${option}`,
      );
    }
    return column;
  };
  const resource = find(o.resourceName, "resourceColumn");
  const token = find(o.tokenName, "tokenColumn");
  if (resource.category !== "S") {
    throw new ConfigError(
      "resourceColumn",
      `column "${resource.name}" of ${where} is ${resource.type}; the resource column holds lock names: make it text`,
    );
  }
  if (!resource.unique_key) {
    throw new ConfigError(
      "resourceColumn",
      `column "${resource.name}" of ${where} is neither its primary key nor a unique column; the fence keeps one row per resource: ALTER TABLE ${o.table} ADD PRIMARY KEY (${o.resource})`,
    );
  }
  if (!TOKEN_TYPES.has(token.type.replace(/\(.*\)$/, ""))) {
    throw new ConfigError(
      "tokenColumn",
      `column "${token.name}" of ${where} is ${token.type}; fencing tokens are 64-bit: ALTER TABLE ${o.table} ALTER COLUMN ${o.token} TYPE bigint`,
    );
  }
  for (const column of columns) {
    if (column === resource || column === token || !column.not_null || column.defaulted) continue;
    throw new ConfigError(
      "table",
      `column "${column.name}" of ${where} is NOT NULL without a default, and the fence inserts only "${resource.name}" and "${token.name}": give it a default`,
    );
  }
}
