import type { BlockBlobClient, ContainerClient } from "@azure/storage-blob";
import { boundedCall } from "@baton/core";
import type { AzureContainerClientLike } from "./azure-blob-clients.js";
import {
  AzureErrorCode,
  BREAK_AT_ONCE,
  decodeLockMetadata,
  HttpStatus,
  INFINITE_LEASE,
  LEASE_STATE_LEASED,
  type LockMetadata,
} from "./azure-blob-codec.js";
import { errorCodeOf, statusOf, toBatonError } from "./azure-blob-errors.js";

/** A lock blob as a HEAD or GET request shows it. */
export interface LockBlobState {
  readonly etag: string;
  readonly leased: boolean;
  readonly meta: LockMetadata;
}

/** A lock blob with its body (a GET). */
export interface LockBlobContent extends LockBlobState {
  readonly body: Buffer;
  /**
   * Milliseconds between the blob's last write (the grant's) and the reply, both by Azure's
   * clock (whole seconds), when the reply tells.
   */
  readonly sinceWriteMs?: number;
}

/** One blob of a listing page: its name and whether a lease holds it. */
export interface ListedBlob {
  readonly name: string;
  readonly leased: boolean;
}

/** A heartbeat blob as a HEAD request shows it. */
export interface HeartbeatState {
  readonly etag: string;
  readonly metadata: Record<string, string>;
  /**
   * Milliseconds between its last write (the last renewal) and the reply, both by Azure's
   * clock (whole seconds), when the reply tells.
   */
  readonly sinceWriteMs?: number;
}

/** A conditional request that did not apply: the condition failed, or a lease was in the way. */
export const REFUSED = Symbol("refused");
/** A request on a blob that does not exist. */
export const MISSING = Symbol("missing");

/** Statuses of a refused conditional request: 412 (condition, lease id) and 409 (lease, exists). */
const REFUSED_STATUSES: readonly number[] = [HttpStatus.preconditionFailed, HttpStatus.conflict];

/**
 * Every Azure request the adapter makes, each bounded by the request timeout (the SDK request
 * is aborted when it runs out), its failures mapped by `toBatonError` with a context naming
 * the container's URL. Expected refusals (a failed `If-Match`, a lease held by another, a
 * blob that is not there) are values, not errors.
 */
export class BlobStore {
  readonly container: ContainerClient;
  /** The container's URL, for messages (never with a SAS token). */
  readonly where: string;
  readonly requestTimeoutMs: number;
  #ensured: Promise<void> | undefined;
  readonly #createContainer: boolean;

  constructor(
    container: AzureContainerClientLike,
    where: string,
    requestTimeoutMs: number,
    createContainer: boolean,
  ) {
    // Accepted by shape (a ContainerClient of the app's own copy of the SDK): called with the
    // SDK's types, which the shape was checked against.
    this.container = container as ContainerClient;
    this.where = where;
    this.requestTimeoutMs = requestTimeoutMs;
    this.#createContainer = createContainer;
  }

  /** The same container with another request timeout (a session's: at most its TTL). */
  bounded(requestTimeoutMs: number): BlobStore {
    if (requestTimeoutMs === this.requestTimeoutMs) return this;
    return new BlobStore(this.container, this.where, requestTimeoutMs, this.#createContainer);
  }

  /** `what (Azure Blob at <container url>)`: the context of every message. */
  context(what: string): string {
    return `${what} (Azure Blob at ${this.where})`;
  }

  /**
   * Runs one SDK request, bounded by `timeoutMs` (default: the request timeout). A request
   * given up on is aborted; `onAbandoned` sees it (to release a late grant).
   */
  call<T>(
    what: string,
    request: (signal: AbortSignal) => Promise<T>,
    options: { timeoutMs?: number; onAbandoned?: (late: Promise<T>) => void } = {},
  ): Promise<T> {
    const controller = new AbortController();
    const context = this.context(what);
    // A keep-alive socket the server closed while idle fails at once with a reset and no
    // reply (Node's servers drop idle sockets after 5 s): sent once more, on a new socket.
    // Every request here is conditional or idempotent, so a resend of one that did apply
    // is refused (If-Match, If-None-Match), finds its own lease, or finds the blob gone.
    const sent = request(controller.signal).catch((error: unknown) => {
      if (!isIdleSocketReset(error) || controller.signal.aborted) throw error;
      return request(controller.signal);
    });
    return boundedCall(sent, {
      timeoutMs: options.timeoutMs ?? this.requestTimeoutMs,
      what: context,
      mapError: (error) => toBatonError(error, context),
      onAbandoned: (late) => {
        controller.abort();
        if (options.onAbandoned !== undefined) options.onAbandoned(late);
        else late.catch(() => undefined);
      },
    });
  }

  blob(name: string): BlockBlobClient {
    return this.container.getBlockBlobClient(name);
  }

  /**
   * Creates the container once, when a request found it missing and `createContainer` is on;
   * otherwise the `ConfigError` naming `container` that the request failed with is thrown.
   */
  async ensureContainer(error: unknown): Promise<void> {
    if (!this.#createContainer) throw error;
    this.#ensured ??= this.call("could not create the container", (abortSignal) =>
      this.container.createIfNotExists({ abortSignal }),
    ).then(
      () => undefined,
      (e: unknown) => {
        this.#ensured = undefined;
        throw e;
      },
    );
    await this.#ensured;
  }

  /** HEAD of a lock blob, or {@link MISSING}. */
  async headLock(what: string, name: string): Promise<LockBlobState | typeof MISSING> {
    return await this.call(what, (abortSignal) =>
      this.blob(name)
        .getProperties({ abortSignal })
        .then(
          (p) => ({
            etag: p.etag as string,
            leased: p.leaseState === LEASE_STATE_LEASED,
            meta: decodeLockMetadata(p.metadata),
          }),
          (e: unknown) => missingOr(e),
        ),
    );
  }

  /** GET of a lock blob (state and body, in one request), or {@link MISSING}. */
  async getLock(what: string, name: string): Promise<LockBlobContent | typeof MISSING> {
    return await this.call(what, async (abortSignal) => {
      try {
        const r = await this.blob(name).download(0, undefined, { abortSignal });
        const body = await streamToBuffer(r.readableStreamBody);
        const since = sinceWrite(r);
        return {
          etag: r.etag as string,
          leased: r.leaseState === LEASE_STATE_LEASED,
          meta: decodeLockMetadata(r.metadata),
          body,
          ...(since === undefined ? {} : { sinceWriteMs: since }),
        };
      } catch (e) {
        return missingOr(e);
      }
    });
  }

  /**
   * Puts a lock blob's body and metadata, if its ETag is `ifMatch` (or, for `null`, if it does
   * not exist) and, with `leaseId`, under that lease. The new ETag, or {@link REFUSED}.
   */
  async putLock(
    what: string,
    name: string,
    body: Buffer,
    metadata: Record<string, string>,
    ifMatch: string | null,
    leaseId?: string,
  ): Promise<string | typeof REFUSED> {
    return await this.call(what, (abortSignal) =>
      this.blob(name)
        .upload(body, body.length, {
          abortSignal,
          metadata,
          conditions: {
            ...(ifMatch === null ? { ifNoneMatch: "*" } : { ifMatch }),
            ...(leaseId === undefined ? {} : { leaseId }),
          },
        })
        .then(
          (r) => r.etag as string,
          (e: unknown) => refusedOr(e),
        ),
    );
  }

  /**
   * Acquires an infinite lease with id `leaseId` on a blob whose ETag is `ifMatch`: true, or
   * {@link REFUSED} (another lease is there, or the blob changed), or {@link MISSING}.
   */
  async acquireLease(
    what: string,
    name: string,
    leaseId: string,
    ifMatch: string,
    onAbandoned?: (late: Promise<true | typeof REFUSED | typeof MISSING>) => void,
  ): Promise<true | typeof REFUSED | typeof MISSING> {
    return await this.call(
      what,
      (abortSignal) =>
        this.blob(name)
          .getBlobLeaseClient(leaseId)
          .acquireLease(INFINITE_LEASE, { abortSignal, conditions: { ifMatch } })
          .then(
            () => true as const,
            (e: unknown) => (statusOf(e) === HttpStatus.notFound ? MISSING : refusedOr(e)),
          ),
      onAbandoned === undefined ? {} : { onAbandoned },
    );
  }

  /**
   * Releases lease `leaseId`, only while the blob's ETag is `ifMatch` when given: true, or
   * {@link REFUSED} (no such lease: released, broken and taken, or the blob changed).
   */
  async releaseLease(
    what: string,
    name: string,
    leaseId: string,
    ifMatch?: string,
  ): Promise<true | typeof REFUSED> {
    return await this.call(what, (abortSignal) =>
      this.blob(name)
        .getBlobLeaseClient(leaseId)
        .releaseLease({
          abortSignal,
          ...(ifMatch === undefined ? {} : { conditions: { ifMatch } }),
        })
        .then(
          () => true as const,
          (e: unknown) => (statusOf(e) === HttpStatus.notFound ? REFUSED : refusedOr(e)),
        ),
    );
  }

  /** Breaks a lock blob's lease at once, only while its ETag is `ifMatch`: true or {@link REFUSED}. */
  async breakLease(what: string, name: string, ifMatch: string): Promise<true | typeof REFUSED> {
    return await this.call(what, (abortSignal) =>
      this.blob(name)
        .getBlobLeaseClient()
        .breakLease(BREAK_AT_ONCE, { abortSignal, conditions: { ifMatch } })
        .then(
          () => true as const,
          (e: unknown) => (statusOf(e) === HttpStatus.notFound ? REFUSED : refusedOr(e)),
        ),
    );
  }

  /** Creates a heartbeat blob (only if absent): its ETag, or {@link REFUSED}. */
  async createHeartbeat(
    what: string,
    name: string,
    metadata: Record<string, string>,
    timeoutMs: number,
  ): Promise<string | typeof REFUSED> {
    return await this.call(
      what,
      (abortSignal) =>
        this.blob(name)
          .upload(Buffer.alloc(0), 0, { abortSignal, metadata, conditions: { ifNoneMatch: "*" } })
          .then(
            (r) => r.etag as string,
            (e: unknown) => refusedOr(e),
          ),
      { timeoutMs },
    );
  }

  /**
   * Rewrites a heartbeat's metadata (a new ETag), only while its ETag is `ifMatch` when given:
   * the new ETag, {@link REFUSED} (it changed) or {@link MISSING} (it is gone).
   */
  async beat(
    what: string,
    name: string,
    metadata: Record<string, string>,
    timeoutMs: number,
    ifMatch?: string,
  ): Promise<string | typeof REFUSED | typeof MISSING> {
    return await this.call(
      what,
      (abortSignal) =>
        this.blob(name)
          .setMetadata(metadata, {
            abortSignal,
            ...(ifMatch === undefined ? {} : { conditions: { ifMatch } }),
          })
          .then(
            (r) => r.etag as string,
            (e: unknown) => (statusOf(e) === HttpStatus.notFound ? missingOr(e) : refusedOr(e)),
          ),
      { timeoutMs },
    );
  }

  /** HEAD of a heartbeat blob, or {@link MISSING}. */
  async headHeartbeat(
    what: string,
    name: string,
    timeoutMs?: number,
  ): Promise<HeartbeatState | typeof MISSING> {
    return await this.call(
      what,
      (abortSignal) =>
        this.blob(name)
          .getProperties({ abortSignal })
          .then(
            (p) => {
              const since = sinceWrite(p);
              return {
                etag: p.etag as string,
                metadata: p.metadata ?? {},
                ...(since === undefined ? {} : { sinceWriteMs: since }),
              };
            },
            (e: unknown) => missingOr(e),
          ),
      timeoutMs === undefined ? {} : { timeoutMs },
    );
  }

  /**
   * One page of the blobs whose names start with `prefix`: at most `maxPageSize`, from
   * `continuationToken` (absent: the first page); `cursor` is absent on the last page.
   */
  async listBlobs(
    what: string,
    prefix: string,
    maxPageSize: number,
    continuationToken: string | undefined,
  ): Promise<{ readonly blobs: readonly ListedBlob[]; readonly cursor?: string }> {
    return await this.call(what, async (abortSignal) => {
      const pages = this.container
        .listBlobsFlat({ prefix, abortSignal })
        .byPage({ maxPageSize, ...(continuationToken === undefined ? {} : { continuationToken }) });
      const page = await pages.next();
      if (page.done === true) return { blobs: [] };
      const blobs = page.value.segment.blobItems.map((b) => ({
        name: b.name,
        leased: b.properties.leaseState === LEASE_STATE_LEASED,
      }));
      const cursor = page.value.continuationToken;
      return cursor === undefined || cursor === "" ? { blobs } : { blobs, cursor };
    });
  }

  /**
   * Deletes a blob, only while its ETag is `ifMatch` when given: true, {@link REFUSED} (it
   * changed) or {@link MISSING} (already gone).
   */
  async deleteBlob(
    what: string,
    name: string,
    ifMatch?: string,
  ): Promise<true | typeof REFUSED | typeof MISSING> {
    return await this.call(what, (abortSignal) =>
      this.blob(name)
        .delete({ abortSignal, ...(ifMatch === undefined ? {} : { conditions: { ifMatch } }) })
        .then(
          () => true as const,
          (e: unknown) => (statusOf(e) === HttpStatus.notFound ? MISSING : refusedOr(e)),
        ),
    );
  }

  /** GET of a record blob: body and ETag, or {@link MISSING}. */
  async getRecord(
    what: string,
    name: string,
  ): Promise<{ body: Buffer; etag: string } | typeof MISSING> {
    return await this.call(what, async (abortSignal) => {
      try {
        const r = await this.blob(name).download(0, undefined, { abortSignal });
        const body = await streamToBuffer(r.readableStreamBody);
        return { body, etag: r.etag as string };
      } catch (e) {
        return missingOr(e);
      }
    });
  }
}

/** A blob's age by Azure's clock: the reply's `Date` less its `Last-Modified`, when both are there. */
function sinceWrite(reply: { date?: Date; lastModified?: Date }): number | undefined {
  if (reply.date === undefined || reply.lastModified === undefined) return undefined;
  const ms = reply.date.getTime() - reply.lastModified.getTime();
  return Number.isNaN(ms) ? undefined : Math.max(0, ms);
}

/** A request that failed with a reset connection and no reply at all. */
function isIdleSocketReset(error: unknown): boolean {
  if (statusOf(error) !== undefined) return false;
  const code = errorCodeOf(error);
  return (
    code === "ECONNRESET" ||
    code === "EPIPE" ||
    /socket hang up/i.test(String((error as Error)?.message))
  );
}

/** {@link MISSING} for a 404 on a blob, else the error again (a missing container included). */
function missingOr(error: unknown): typeof MISSING {
  if (
    statusOf(error) === HttpStatus.notFound &&
    errorCodeOf(error) !== AzureErrorCode.containerNotFound
  ) {
    return MISSING;
  }
  throw error;
}

/** {@link REFUSED} for a 409 or 412, else the error again. */
function refusedOr(error: unknown): typeof REFUSED {
  const status = statusOf(error);
  if (status !== undefined && REFUSED_STATUSES.includes(status)) return REFUSED;
  throw error;
}

async function streamToBuffer(stream: NodeJS.ReadableStream | undefined): Promise<Buffer> {
  if (stream === undefined) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const chunk of stream)
    chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks);
}
