import { boundedCall, ConfigError, type StoredRecord } from "@baton/core";
import {
  decodeRecord,
  decodeWrittenVersion,
  encodeExpectedVersion,
  lastRows,
} from "./mysql-codec.js";
import { ER, errorNumber } from "./mysql-errors.js";
import type { RecordStatements } from "./mysql-lease-statements.js";

/** Longest record key, in bytes of UTF-8 (the key column's size). */
export const RECORD_KEY_MAX_BYTES = 2048;

/** What the records of a session need from it. */
export interface MysqlRecordCalls {
  readonly statements: RecordStatements;
  readonly namespace: string;
  /** How long one call may take before it is given up on (`BackendUnavailableError`). */
  readonly timeoutMs: number;
  /** Runs one call (one round trip): mysql2's result, or its error. */
  run(sql: string, values: unknown[]): Promise<unknown>;
  /** The error to throw for a failed call (`toBatonError(error, context)`, or the session's loss). */
  failure(error: unknown, context: string): unknown;
}

/**
 * Durable records in MySQL or MariaDB, for `runOnce` and `schedule`: one row per record in the
 * records table, never expiring and never deleted by Baton, so records outlive every session
 * and lock. Each write is one statement, committed on its own: a create is an `INSERT` that a
 * duplicate key refuses; an update is an `UPDATE` of the expected version. The version is a
 * BIGINT that every write raises to at least the server's clock in microseconds, so a record
 * lost and written again never takes a write that expects a version from before (as long as the
 * server's clock did not go back). The new version comes back in the same reply:
 * `LAST_INSERT_ID(expr)` sets it, and the server returns it as the OK packet's `insertId`.
 */
export class MysqlRecords {
  readonly #calls: MysqlRecordCalls;

  constructor(calls: MysqlRecordCalls) {
    this.#calls = calls;
  }

  /** The record `key`, or `null`. */
  read(key: string): Promise<StoredRecord | null> {
    checkKey(key);
    return this.#call("read", key, this.#calls.statements.read, [this.#calls.namespace, key], (r) =>
      decodeRecord(lastRows(r)),
    );
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none); the
   * new version, or `null` when it did not match (nothing was written).
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    checkKey(key);
    const { statements, namespace } = this.#calls;
    if (expected === null) {
      return this.#call(
        "write",
        key,
        statements.create,
        [namespace, key, value],
        decodeWrittenVersion,
        true,
      );
    }
    const version = encodeExpectedVersion(expected);
    if (version === undefined) return null;
    return this.#call(
      "write",
      key,
      statements.update,
      [value, namespace, key, version],
      decodeWrittenVersion,
    );
  }

  async #call<T>(
    what: "read" | "write",
    key: string,
    sql: string,
    values: unknown[],
    decode: (reply: unknown) => T,
    create = false,
  ): Promise<T | null> {
    const context = `mysql record ${what} of "${key}"`;
    const call = this.#calls.run(sql, values).then(decode, (error: unknown) => {
      // A create that found the record: no write, as an update whose version did not match.
      if (create && errorNumber(error) === ER.dupEntry) return null;
      throw error;
    });
    return boundedCall(call, {
      timeoutMs: this.#calls.timeoutMs,
      what: `a MySQL record ${what}`,
      name: key,
      mapError: (error) => this.#calls.failure(error, context),
    });
  }
}

/** A record key longer than its column would be cut short by the server: refused first. */
function checkKey(key: string): void {
  if (Buffer.byteLength(key, "utf8") > RECORD_KEY_MAX_BYTES) {
    throw new ConfigError(
      "key",
      `a record key is at most ${RECORD_KEY_MAX_BYTES} bytes of UTF-8 on MySQL, got ${Buffer.byteLength(key, "utf8")}`,
    );
  }
}
