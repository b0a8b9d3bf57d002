import { ConfigError } from "@baton/core";
import type { ResolvedMysqlFenceOptions } from "./mysql-fence-options.js";

/** Runs one statement with `?` parameters, as a mysql2 promise pool or connection does. */
export interface MysqlFenceQueryable {
  /** Runs `sql` with `values` for its `?`; resolves `[rows or result header, fields]`. */
  query(sql: string, values?: unknown[]): Promise<readonly [unknown, unknown]>;
}

/** One column of the fence table as `information_schema` describes it. */
interface ColumnRow {
  readonly kind: string;
  readonly name: string;
  readonly type: string;
  readonly dataType: string;
  readonly collation: string | null;
  readonly precision: number | string | null;
  readonly scale: number | string | null;
  readonly notNull: number | string;
  readonly defaulted: number | string;
  readonly uniqueKey: number | string;
}

const COLUMNS = `SELECT t.TABLE_TYPE AS kind, c.COLUMN_NAME AS name, c.COLUMN_TYPE AS type,
  LOWER(c.DATA_TYPE) AS dataType, c.COLLATION_NAME AS collation,
  c.NUMERIC_PRECISION AS \`precision\`, c.NUMERIC_SCALE AS scale,
  c.IS_NULLABLE = 'NO' AS notNull,
  (c.COLUMN_DEFAULT IS NOT NULL OR c.EXTRA LIKE '%auto_increment%' OR c.EXTRA LIKE '%GENERATED%') AS defaulted,
  EXISTS (SELECT 1 FROM information_schema.STATISTICS s
    WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND s.NON_UNIQUE = 0
      AND s.SEQ_IN_INDEX = 1 AND s.COLUMN_NAME = c.COLUMN_NAME AND s.SUB_PART IS NULL
      AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS s2
        WHERE s2.TABLE_SCHEMA = s.TABLE_SCHEMA AND s2.TABLE_NAME = s.TABLE_NAME
          AND s2.INDEX_NAME = s.INDEX_NAME AND s2.SEQ_IN_INDEX = 2)) AS uniqueKey
FROM information_schema.TABLES t
JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME
WHERE t.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND t.TABLE_NAME = ?
ORDER BY c.ORDINAL_POSITION`;

/** Resource column types whose values compare byte for byte, or by a collation we check. */
const TEXT_TYPES = new Set(["char", "varchar", "tinytext", "text", "mediumtext", "longtext"]);
const BINARY_TYPES = new Set(["binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"]);
/** A DECIMAL column holds every 64-bit token with at least this many digits and no scale. */
const TOKEN_DIGITS = 19;

/** Error numbers of MySQL and MariaDB for a statement the user may not run. */
const PRIVILEGE_ERRNOS = new Set([
  1044, // ER_DBACCESS_DENIED_ERROR
  1142, // ER_TABLEACCESS_DENIED_ERROR
  1227, // ER_SPECIFIC_ACCESS_DENIED_ERROR
]);
/** ER_NO_DB_ERROR: no database selected, for a table named without one. */
const NO_DATABASE_ERRNO = 1046;

/** The statement that creates the fence table. */
export function createFenceStatement(o: ResolvedMysqlFenceOptions): string {
  // VARBINARY: resource names compare byte for byte, never case- or accent-insensitively.
  // 1024 bytes hold the longest lock name (256 characters of up to 4 bytes).
  return `CREATE TABLE IF NOT EXISTS ${o.table.sql} (${o.resource} VARBINARY(1024) NOT NULL PRIMARY KEY, ${o.token} BIGINT NOT NULL) ENGINE=InnoDB`;
}

/**
 * Creates the fence table when missing, then checks that the table (the user's own, or one
 * created by another process) has what the fence's statements need, so a mismatch is a
 * `ConfigError` naming the option at first use, not a raw SQL error at the first write.
 * `storeError` turns the driver's other errors into Baton's.
 */
export async function prepareFenceTable(
  db: MysqlFenceQueryable,
  o: ResolvedMysqlFenceOptions,
  storeError: (error: unknown, context: string) => unknown,
): Promise<void> {
  let columns = await readColumns(db, o, storeError);
  if (columns.length === 0) {
    await createFenceTable(db, o, storeError);
    columns = await readColumns(db, o, storeError);
  }
  checkFenceTable(columns, o);
}

async function readColumns(
  db: MysqlFenceQueryable,
  o: ResolvedMysqlFenceOptions,
  storeError: (error: unknown, context: string) => unknown,
): Promise<ColumnRow[]> {
  try {
    const [rows] = await db.query(COLUMNS, [o.table.database ?? null, o.table.table]);
    return rows as ColumnRow[];
  } catch (error) {
    throw storeError(error, `could not read the fence table ${o.table.sql}`);
  }
}

async function createFenceTable(
  db: MysqlFenceQueryable,
  o: ResolvedMysqlFenceOptions,
  storeError: (error: unknown, context: string) => unknown,
): Promise<void> {
  try {
    // IF NOT EXISTS: a concurrent creator's table is kept, and checked next.
    await db.query(createFenceStatement(o));
  } catch (error) {
    const errno = (error as { errno?: unknown } | null)?.errno;
    if (typeof errno === "number" && PRIVILEGE_ERRNOS.has(errno)) {
      throw new ConfigError(
        "privileges",
        `may not create the fence table ${o.table.sql} (${(error as Error).message}); create it once as a privileged user: ${createFenceStatement(o)}`,
        { cause: error },
      );
    }
    if (errno === NO_DATABASE_ERRNO) {
      throw new ConfigError(
        "table",
        `the connection has no database selected: name one in the URL or the pool's options, or name the fence table as "database.table" (${(error as Error).message})`,
        { cause: error },
      );
    }
    throw storeError(error, `could not create the fence table ${o.table.sql}`);
  }
}

const truthy = (value: number | string | null): boolean => Number(value) === 1;

function checkFenceTable(columns: readonly ColumnRow[], o: ResolvedMysqlFenceOptions): void {
  const where = `the fence table ${o.table.sql}`;
  if (columns[0]?.kind !== "BASE TABLE") {
    throw new ConfigError("table", `${where} is not a table (a view or another kind)`);
  }
  const names = columns.map((c) => c.name).join(", ");
  const find = (name: string, option: string): ColumnRow => {
    // Column names are case-insensitive in MySQL and MariaDB.
    const column = columns.find((c) => c.name.toLowerCase() === name.toLowerCase());
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
  const isText = TEXT_TYPES.has(resource.dataType);
  if (!isText && !BINARY_TYPES.has(resource.dataType)) {
    throw new ConfigError(
      "resourceColumn",
      `column "${resource.name}" of ${where} is ${resource.type}; the resource column holds lock names: make it VARBINARY(1024), or VARCHAR with a binary collation`,
    );
  }
  // A case- or accent-insensitive collation would make "Invoices" and "invoices" one fence.
  if (isText && !/_bin$/i.test(resource.collation ?? "")) {
    throw new ConfigError(
      "resourceColumn",
      `column "${resource.name}" of ${where} has the collation ${resource.collation}, which compares names ignoring case or accents, so two locks would share one fence: ALTER TABLE ${o.table.sql} MODIFY ${o.resource} ${resource.type} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`,
    );
  }
  if (!truthy(resource.uniqueKey)) {
    throw new ConfigError(
      "resourceColumn",
      `column "${resource.name}" of ${where} is neither its primary key nor a unique column of its own; the fence keeps one row per resource: ALTER TABLE ${o.table.sql} ADD PRIMARY KEY (${o.resource})`,
    );
  }
  const wideDecimal =
    token.dataType === "decimal" &&
    Number(token.scale) === 0 &&
    Number(token.precision) >= TOKEN_DIGITS;
  if (token.dataType !== "bigint" && !wideDecimal) {
    throw new ConfigError(
      "tokenColumn",
      `column "${token.name}" of ${where} is ${token.type}; fencing tokens are 64-bit: ALTER TABLE ${o.table.sql} MODIFY ${o.token} BIGINT NOT NULL`,
    );
  }
  for (const column of columns) {
    if (column === resource || column === token) continue;
    if (!truthy(column.notNull) || truthy(column.defaulted)) continue;
    throw new ConfigError(
      "table",
      `column "${column.name}" of ${where} is NOT NULL without a default, and the fence inserts only "${resource.name}" and "${token.name}": give it a default`,
    );
  }
}
