import { BackendUnavailableError, type StoredRecord } from "@baton/core";
import {
  decodeRecordValue,
  decodeRecordVersion,
  encodeRecordValue,
  encodeRecordVersion,
} from "./azure-blob-codec.js";
import { recordBlobName } from "./azure-blob-keys.js";
import { type BlobStore, MISSING, REFUSED } from "./blob-store.js";

/**
 * Durable records in Azure Blob Storage: one block blob per record (see `recordBlobName` in
 * azure-blob-keys.ts), its body the record's value, its ETag the record's version. Record
 * blobs are never leased and never expire. A write is one `Put Blob` with `If-Match` on the
 * expected ETag (`If-None-Match: *` for "only if absent"); a read is one GET. Azure Storage is
 * strongly consistent: a read after a write sees it.
 */
export class AzureBlobRecords {
  readonly #store: BlobStore;
  readonly #prefix: string;

  constructor(store: BlobStore, prefix: string) {
    this.#store = store;
    this.#prefix = prefix;
  }

  /** The record `key`, or `null`. */
  async read(key: string): Promise<StoredRecord | null> {
    const found = await this.#store.getRecord(
      `could not read the record "${key}"`,
      recordBlobName(this.#prefix, key),
    );
    if (found === MISSING) return null;
    return { value: decodeRecordValue(found.body), version: encodeRecordVersion(found.etag) };
  }

  /**
   * Writes `value` if the record's version is `expected` (`null`: only if there is none): the
   * new version, or `null` when the version did not match and nothing was written.
   *
   * A write whose reply was lost may still have been applied, and a client with retries (one
   * you built yourself) resends a failed request, so a write applied once can come back as a
   * mismatch of its own resend. Both are settled by the record itself: holding exactly
   * `value` at a version other than `expected`, it is this write. That is sound because no
   * other writer writes the same bytes: every value core writes carries the writer's owner id
   * and the fencing token of its lock. Anything else after a lost reply fails with a
   * `BackendUnavailableError`: the write may still land, so "not written" cannot be told.
   */
  async write(key: string, value: string, expected: string | null): Promise<string | null> {
    const etag = expected === null ? null : decodeRecordVersion(expected);
    // A version no blob can have matches no record: refused without a request.
    if (etag === undefined) return null;
    const blob = recordBlobName(this.#prefix, key);
    const data = encodeRecordValue(value);
    const what = `could not write the record "${key}"`;
    let written: string | typeof REFUSED;
    try {
      written = await this.#store.putLock(what, blob, data, {}, etag);
    } catch (error) {
      if (!(error instanceof BackendUnavailableError)) throw error;
      const settled = await this.#ours(what, blob, data, etag).catch(() => undefined);
      if (settled !== undefined) return settled;
      throw error;
    }
    if (written !== REFUSED) return encodeRecordVersion(written);
    return (await this.#ours(what, blob, data, etag)) ?? null;
  }

  /** The record's version when it holds exactly `data` at a version other than `expected`. */
  async #ours(
    what: string,
    blob: string,
    data: Buffer,
    expected: string | null,
  ): Promise<string | undefined> {
    const found = await this.#store.getRecord(what, blob);
    if (found === MISSING || !found.body.equals(data) || found.etag === expected) return undefined;
    return encodeRecordVersion(found.etag);
  }
}
