import { BackendUnavailableError, type StoredRecord } from "@baton/core";
import {
  CompareResult,
  CompareTarget,
  type IKeyValue,
  type ITxnRequest,
  type ITxnResponse,
} from "etcd3";
import {
  decodeRecordValue,
  decodeRecordVersion,
  decodeRevision,
  encodeRecordValue,
  encodeRecordVersion,
  encodeRevision,
} from "./etcd-codec.js";
import { recordKey } from "./etcd-keys.js";
import type { EtcdKv } from "./etcd-kv.js";

/**
 * Durable records in etcd: one key per record (see `recordKey` in etcd-keys.ts), its value the
 * record's value, its `mod_revision` the record's version. Record keys are on no lease: they
 * never expire and outlive the session that wrote them. A write is one transaction, a compare
 * of the key's revision and a put; a read is one linearizable range. Every call goes through
 * {@link EtcdKv}: bounded by the request timeout, errors mapped by `toBatonError`.
 */
export class EtcdRecords {
  readonly #kv: EtcdKv;
  readonly #prefix: string;

  constructor(kv: EtcdKv, prefix: string) {
    this.#kv = kv;
    this.#prefix = prefix;
  }

  /** The record `key`, or `null`: read by a linearizable range, so never stale. */
  async read(key: string): Promise<StoredRecord | null> {
    const { kvs } = await this.#kv.range(
      { key: recordKey(this.#prefix, key) },
      `could not read the record "${key}"`,
    );
    const found = kvs[0];
    if (found === undefined) return null;
    return {
      value: decodeRecordValue(found.value),
      version: encodeRecordVersion(decodeRevision(found.mod_revision)),
    };
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none): the
   * new version (the revision of the transaction that wrote it), or `null` when the version
   * did not match and nothing was written.
   *
   * A transaction whose reply was lost (a reset connection, a leader change, the request
   * timeout) may still have been applied, and the etcd3 client resends a failed call, so a
   * write applied once can come back as a mismatch of its own resend. Both are settled by
   * the record itself: holding exactly `value`, written after `expected`, it is this write.
   * That is sound because no other writer writes the same bytes: every value core writes
   * carries the writer's owner id and the fencing token of its lock, and a token is never
   * handed out twice. Anything else after a lost reply fails with a `BackendUnavailableError`:
   * the write may still be applied later, so "not written" cannot be told.
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const revision = expected === null ? null : decodeRecordVersion(expected);
    // A version no key can have matches no record: refused without a call.
    if (revision === undefined) return null;
    const target = recordKey(this.#prefix, key);
    const data = encodeRecordValue(value);
    const what = `could not write the record "${key}"`;
    let response: ITxnResponse;
    try {
      response = await this.#kv.txn(writeTxn(target, data, revision), what);
    } catch (error) {
      if (!(error instanceof BackendUnavailableError)) throw error;
      const settled = await this.#kv.range({ key: target }, what).then(
        ({ kvs }) => ourWrite(kvs[0], data, revision),
        () => undefined,
      );
      if (settled !== undefined) return settled;
      throw error;
    }
    if (response.succeeded) {
      return encodeRecordVersion(decodeRevision(response.header.revision));
    }
    return ourWrite(response.responses[0]?.response_range.kvs[0], data, revision) ?? null;
  }
}

/**
 * Puts `value` at `key` (on no lease) if its `mod_revision` is `expected`, or, for `null`, if
 * the key does not exist (`create_revision` 0); otherwise reads the key.
 */
function writeTxn(key: Buffer, value: Buffer, expected: bigint | null): ITxnRequest {
  return {
    compare: [
      expected === null
        ? { key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: 0 }
        : {
            key,
            target: CompareTarget.Mod,
            result: CompareResult.Equal,
            mod_revision: encodeRevision(expected),
          },
    ],
    success: [{ request_put: { key, value } }],
    failure: [{ request_range: { key } }],
  };
}

/**
 * The version of `found` when it is this write: it holds exactly `value` and was written after
 * `expected` (any write, for `null`). `undefined` otherwise.
 */
function ourWrite(
  found: IKeyValue | undefined,
  value: Buffer,
  expected: bigint | null,
): string | undefined {
  if (found === undefined || !found.value.equals(value)) return undefined;
  const modRevision = decodeRevision(found.mod_revision);
  if (expected !== null && modRevision <= expected) return undefined;
  return encodeRecordVersion(modRevision);
}
