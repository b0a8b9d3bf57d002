import type { StoredRecord } from "@baton/core";
import { boundedCall } from "@baton/core";
import type { RedisClient } from "./redis-client.js";
import {
  decodeRecordReply,
  decodeRecordWriteReply,
  encodeRecordWrite,
  isRecordVersionAfter,
  RECORD_VALUE_FIELD,
  RECORD_VERSION_FIELD,
} from "./redis-codec.js";
import { toBatonError } from "./redis-errors.js";
import { recordKey } from "./redis-keys.js";
import { WRITE_RECORD } from "./scripts.js";
import { whenReady } from "./when-ready.js";

/** What the records of a session need from it. */
export interface RedisRecordCalls {
  /** The backend's client (a node or a Cluster). */
  readonly client: RedisClient;
  /** Prefix of every key. */
  readonly keyPrefix: string;
  /** Bound of each call. */
  readonly commandTimeoutMs: number;
}

/**
 * Durable records in Redis: one hash per record at `<prefix>records:{<key>}` (see
 * redis-keys.ts), holding the value and an integer version, with no expiry: records outlive
 * the session that wrote them. A write is one script call ({@link WRITE_RECORD}), a
 * compare-and-set of the version; versions come from the server's clock, so they never
 * restart below what a record lost with the node's data had; a read is one `HMGET`. One key per record, so both run on
 * the Cluster node of the record's slot.
 */
export class RedisRecords {
  readonly #calls: RedisRecordCalls;

  constructor(calls: RedisRecordCalls) {
    this.#calls = calls;
  }

  /** The record `key`, or `null`. */
  async read(key: string): Promise<StoredRecord | null> {
    return decodeRecordReply(await this.#hmget(key, `redis record read of "${key}"`));
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none); the
   * new version, or `null` when it did not match. A write whose outcome is unknown (its reply
   * lost with the connection, or not in time) is settled by reading the record once the
   * client is ready again: holding exactly `value` at a version above `expected`, it is this
   * write (core's values carry the lock's token, so two writers never write
   * the same bytes); otherwise the call fails with the write's `BackendUnavailableError`.
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const args = encodeRecordWrite(value, expected);
    // No record has a version that is not one of ours: nothing can match it.
    if (args === undefined) return null;
    const context = `redis record write of "${key}"`;
    const { client, keyPrefix, commandTimeoutMs } = this.#calls;
    try {
      const reply = await boundedCall(WRITE_RECORD.run(client, [recordKey(keyPrefix, key)], args), {
        timeoutMs: commandTimeoutMs,
        what: "redis record write",
        name: key,
        mapError: (e) => toBatonError(e, context),
      });
      return decodeRecordWriteReply(reply);
    } catch (error) {
      const ours = await this.#written(key, value, expected, context).catch(() => null);
      if (ours !== null) return ours;
      throw toBatonError(error, context);
    }
  }

  /**
   * Once the client is ready, the version of record `key` when it holds exactly `value` at a
   * version above `expected` (this write took effect), or `null`.
   */
  async #written(
    key: string,
    value: string,
    expected: string | null,
    context: string,
  ): Promise<string | null> {
    await whenReady(this.#calls.client, this.#calls.commandTimeoutMs, context);
    const record = decodeRecordReply(await this.#hmget(key, context));
    if (record === null || record.value !== value) return null;
    return isRecordVersionAfter(record.version, expected) ? record.version : null;
  }

  #hmget(key: string, context: string): Promise<unknown> {
    const { client, keyPrefix, commandTimeoutMs } = this.#calls;
    return boundedCall(
      client.hmget(recordKey(keyPrefix, key), RECORD_VALUE_FIELD, RECORD_VERSION_FIELD),
      {
        timeoutMs: commandTimeoutMs,
        what: context,
        mapError: (e) => toBatonError(e, context),
      },
    );
  }
}
