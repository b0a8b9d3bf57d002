import { randomInt } from "node:crypto";
import { GetItemCommand, PutItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { BackendUnavailableError, type StoredRecord } from "@baton/core";
import {
  ATTR,
  decodeRecord,
  decodeRecordVersion,
  encodeKey,
  encodeNumber,
  encodeString,
} from "./dynamodb-codec.js";
import { isConditionFailed } from "./dynamodb-errors.js";
import { PARTITION_KEY, recordKey } from "./dynamodb-keys.js";
import type { DynamoDBTable } from "./dynamodb-table.js";

/** Random values below each millisecond of a version (20 bits). */
const VERSION_SPREAD = 1n << 20n;

/**
 * Durable records in DynamoDB: one item per record (see `recordKey` in dynamodb-keys.ts)
 * holding `value` and `version`. Records never expire and outlive the session that wrote them.
 * A write is one conditional request (a put "only if absent", or an update "only if the
 * version is still the one expected"); a read is one strongly consistent `GetItem`.
 *
 * A version comes from the writer's clock ({@link nextVersion}), not from a counter that
 * starts at 1, so a record lost (a deleted item, a table emptied or restored) and written
 * again does not take a write that expects a version from before the loss.
 */
export class DynamoDBRecords {
  readonly #table: DynamoDBTable;
  readonly #prefix: string;

  constructor(table: DynamoDBTable, prefix: string) {
    this.#table = table;
    this.#prefix = prefix;
  }

  /** The record `key`, or `null`: a strongly consistent read, so never stale. */
  async read(key: string): Promise<StoredRecord | null> {
    return (await this.#read(key, `could not read the record "${key}"`)) ?? null;
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none): the
   * new version, or `null` when the version did not match and nothing was written.
   *
   * A write whose reply was lost (a timeout, a reset connection) may still have been applied.
   * It is settled by reading the record back: holding exactly `value` at a version after
   * `expected`, it is this write. That is sound because no other writer writes the same
   * bytes: every value core writes carries the writer's owner id and its lock's fencing
   * token. Anything else after a lost reply fails with a `BackendUnavailableError`: the write
   * may still be applied later, so "not written" cannot be told.
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const version = expected === null ? null : decodeRecordVersion(expected);
    // A version no record can have matches none: refused without a call.
    if (version === undefined) return null;
    const what = `could not write the record "${key}"`;
    const item = recordKey(this.#prefix, key);
    const next = nextVersion(version);
    try {
      if (version === null) {
        await this.#table.call(
          (abortSignal) =>
            this.#table.client.send(
              new PutItemCommand({
                TableName: this.#table.name,
                Item: {
                  ...encodeKey(item),
                  [ATTR.value]: encodeString(value),
                  [ATTR.version]: encodeNumber(next),
                },
                ConditionExpression: "attribute_not_exists(#pk)",
                ExpressionAttributeNames: { "#pk": PARTITION_KEY },
              }),
              { abortSignal },
            ),
          what,
        );
        return next.toString();
      }
      await this.#table.call(
        (abortSignal) =>
          this.#table.client.send(
            new UpdateItemCommand({
              TableName: this.#table.name,
              Key: encodeKey(item),
              UpdateExpression: "SET #value = :value, #version = :next",
              ConditionExpression: "#version = :expected",
              ExpressionAttributeNames: { "#value": ATTR.value, "#version": ATTR.version },
              ExpressionAttributeValues: {
                ":value": encodeString(value),
                ":next": encodeNumber(next),
                ":expected": encodeNumber(version),
              },
            }),
            { abortSignal },
          ),
        what,
      );
      return next.toString();
    } catch (error) {
      if (isConditionFailed(error)) return null;
      if (!(error instanceof BackendUnavailableError)) throw error;
      const settled = await this.#read(key, what).then(
        (found) => ourWrite(found, value, version),
        () => undefined,
      );
      if (settled !== undefined) return settled;
      throw error;
    }
  }

  async #read(key: string, what: string): Promise<StoredRecord | undefined> {
    const reply = await this.#table.call(
      (abortSignal) =>
        this.#table.client.send(
          new GetItemCommand({
            TableName: this.#table.name,
            Key: encodeKey(recordKey(this.#prefix, key)),
            ConsistentRead: true,
          }),
          { abortSignal },
        ),
      what,
    );
    return decodeRecord(reply.Item);
  }
}

/**
 * The version of `found` when it is this write: it holds exactly `value` at a version after
 * `expected` (any version, for `null`). `undefined` otherwise.
 */
function ourWrite(
  found: StoredRecord | undefined,
  value: string,
  expected: bigint | null,
): string | undefined {
  if (found === undefined || found.value !== value) return undefined;
  if (expected !== null && BigInt(found.version) <= expected) return undefined;
  return found.version;
}

/**
 * The version a write gives: this process's clock in milliseconds times 2^20 plus 20 random
 * bits, or the expected version plus one when that is greater, so versions rise with every
 * write. DynamoDB has no server clock a request can read, so the writer's is used: a record
 * lost and written again starts above every version it had unless the new writer's clock is
 * behind the old one's by more than the time between their writes, and even then matches a
 * version from before only when the two clocks' milliseconds meet and the random bits too
 * (one chance in about a million).
 */
export function nextVersion(expected: bigint | null, now = Date.now()): bigint {
  const clock = BigInt(now) * VERSION_SPREAD + BigInt(randomInt(Number(VERSION_SPREAD)));
  return expected !== null && expected + 1n > clock ? expected + 1n : clock;
}
