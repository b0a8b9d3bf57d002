import { boundedCall, ConfigError, type StoredRecord } from "@baton/core";
import { decodeRecord, decodeWrittenVersion, encodeExpectedVersion } from "./postgres-codec.js";
import { SQLSTATE, sqlState } from "./postgres-errors.js";
import type { Statement, Statements } from "./statements.js";

/** What the records of a session need from it. */
export interface PostgresRecordCalls {
  readonly statements: Statements;
  /** How long one call may take before it is given up on (`BackendUnavailableError`). */
  readonly timeoutMs: number;
  /**
   * Runs a statement in the session connection's turn, as `holder()` does (a wait for a lock
   * that occupies the connection is interrupted for it, and sent again after): its rows, or
   * pg's error.
   */
  run(statement: Statement, values: unknown[]): Promise<Record<string, unknown>[]>;
  /**
   * The error to throw for a failed statement: the session's loss when its connection ended,
   * else `toBatonError(error, context)`.
   */
  failure(error: unknown, context: string): unknown;
}

/**
 * Durable records in PostgreSQL: one row per record in the schema's records table (created
 * by `migrate()`, or by the backend with `migrate: true`), its `version` a bigint from the
 * server's clock in microseconds that every write raises (see `RECORD_CLOCK` in
 * postgres-codec.ts), so a row lost and written again never takes a write that expects a
 * version from before. Baton never deletes rows, so they outlive the session that wrote them
 * and every lock; each write is one statement, committed on its own. A create when no record
 * is expected (`INSERT ... ON CONFLICT DO NOTHING`), else an `UPDATE` of that version.
 */
export class PostgresRecords {
  readonly #calls: PostgresRecordCalls;

  constructor(calls: PostgresRecordCalls) {
    this.#calls = calls;
  }

  /** The record `key`, or `null`. */
  read(key: string): Promise<StoredRecord | null> {
    return this.#call("read", key, this.#calls.statements.readRecord, [key], decodeRecord);
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none); the
   * new version, or `null` when it did not match (nothing was written).
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const { statements } = this.#calls;
    if (expected === null) {
      return this.#call("write", key, statements.createRecord, [key, value], decodeWrittenVersion);
    }
    const version = encodeExpectedVersion(expected);
    if (version === undefined) return null;
    return this.#call(
      "write",
      key,
      statements.updateRecord,
      [key, value, version],
      decodeWrittenVersion,
    );
  }

  #call<T>(
    what: "read" | "write",
    key: string,
    statement: Statement,
    values: unknown[],
    decode: (rows: Record<string, unknown>[]) => T,
  ): Promise<T> {
    const context = `postgres record ${what} of "${key}"`;
    return boundedCall(this.#calls.run(statement, values).then(decode), {
      timeoutMs: this.#calls.timeoutMs,
      what: `a PostgreSQL record ${what}`,
      name: key,
      mapError: (error) =>
        sqlState(error) === SQLSTATE.undefinedTable
          ? missingTable(error, context)
          : this.#calls.failure(error, context),
    });
  }
}

/** The records table is missing (migrated before it existed, with a role that may not add it). */
function missingTable(error: unknown, context: string): ConfigError {
  return new ConfigError(
    "schema",
    `${context}: ${(error as Error).message}; run migrate() once (as a role that may create tables in Baton's schema) to create the records table`,
    { cause: error },
  );
}
