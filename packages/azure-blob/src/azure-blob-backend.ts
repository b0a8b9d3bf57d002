import { randomUUID } from "node:crypto";
import {
  type BackendSession,
  BackendUnavailableError,
  boundedCall,
  ConfigError,
  type Guarantees,
  type LockBackend,
  type OpenSessionOptions,
} from "@baton/core";
import type { AzureContainerClientLike } from "./azure-blob-clients.js";
import { encodeHeartbeat } from "./azure-blob-codec.js";
import { sessionBlobName } from "./azure-blob-keys.js";
import { type AzureBlobBackendOptions, resolveAzureBlobOptions } from "./azure-blob-options.js";
import { AzureBlobLeaseSession } from "./azure-blob-session.js";
import { BlobStore, REFUSED } from "./blob-store.js";
import { ReleaseWakeups } from "./release-wakeups.js";
import { SessionLiveness } from "./session-liveness.js";

/**
 * What the Azure Blob backend guarantees: fencing tokens that rise with every grant (a
 * counter in the lock blob's metadata, raised by a write conditional on the blob's ETag),
 * exclusion across processes, durable records, inspection (one `List Blobs` request per page)
 * and forced release of one grant (its lease released in place, the reason left on the
 * holder's heartbeat for its next renewal). No FIFO (waiters poll, and look again within
 * 50 ms once they saw the lock change hands), no consensus of Baton's
 * own (Azure Storage replicates each write synchronously within its region, behind one
 * endpoint).
 */
export const AZURE_BLOB_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: false,
  waiters: "poll-resets",
  tokenCounter: "per-key",
  consensus: false,
  crossProcess: true,
  records: true,
  semaphores: false,
  inspection: true,
  forceRelease: "grant",
};

/**
 * The shortest TTL a session may have, in ms: a renewal is an HTTP request that must settle
 * within a third of it.
 */
export const MIN_TTL_MS = 1_000;

/**
 * The Azure Blob Storage backend (`azblob://account/container`): a lock is a block blob held
 * by an infinite blob lease whose id is the holding session's id; a session is a heartbeat
 * blob renewed by one request per interval; a lock whose session stopped renewing for a
 * whole TTL (on the waiter's own clock) is freed by breaking its lease.
 *
 * @example
 * const backend = new AzureBlobBackend({
 *   endpoint: "http://127.0.0.1:10000/devstoreaccount1",
 *   accountName: "devstoreaccount1",
 *   container: "locks",
 * });
 * const coordinator = createCoordinator({ backend, ttlMs: 10_000 });
 */
export class AzureBlobBackend implements LockBackend {
  readonly kind = "azure-blob";
  readonly guarantees = AZURE_BLOB_GUARANTEES;
  /** Blob name prefix of everything the backend writes. */
  readonly prefix: string;
  /**
   * Where the backend connects, named in core's messages about it: the Blob service's host,
   * e.g. `myaccount.blob.core.windows.net`, or `127.0.0.1:10000` for a path-style endpoint
   * such as Azurite's; never the account key nor a SAS token. Undefined when the client's URL
   * does not parse.
   */
  readonly endpoint: string | undefined;
  readonly #store: BlobStore;
  readonly #pollMaxMs: number;
  readonly #liveness: SessionLiveness;
  readonly #wakeups = new ReleaseWakeups();
  readonly #sessions = new Set<AzureBlobLeaseSession>();
  #closed = false;

  /** Throws `ConfigError` for bad options, before any I/O. */
  constructor(options: AzureBlobBackendOptions) {
    const resolved = resolveAzureBlobOptions(options);
    this.prefix = resolved.prefix;
    this.#pollMaxMs = resolved.pollMaxMs;
    this.endpoint = hostOf(resolved.where);
    this.#store = new BlobStore(
      resolved.container,
      resolved.where,
      resolved.requestTimeoutMs,
      resolved.createContainer,
    );
    this.#liveness = new SessionLiveness(this.#store, this.prefix);
  }

  /**
   * Creates the session's heartbeat blob (and the container, when it is missing and
   * `createContainer` is on). Any whole number of ms from {@link MIN_TTL_MS} is a TTL.
   */
  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    const ttlMs = options.ttlMs;
    if (!Number.isInteger(ttlMs) || ttlMs < MIN_TTL_MS) {
      throw new ConfigError(
        "ttlMs",
        `an Azure Blob session renews by HTTP requests that must settle within a third of it: use a whole number of ms of at least ${MIN_TTL_MS}, got ${String(ttlMs)}`,
      );
    }
    if (options.signal?.aborted) throw options.signal.reason;
    if (this.#closed) throw new BackendUnavailableError(this.#closedMessage());
    const sessionId = randomUUID();
    const heartbeat = sessionBlobName(this.prefix, sessionId);
    const create = async () => {
      const what = "could not open a session";
      const metadata = encodeHeartbeat(ttlMs, 0);
      const timeoutMs = this.#store.requestTimeoutMs;
      try {
        return await this.#store.createHeartbeat(what, heartbeat, metadata, timeoutMs);
      } catch (error) {
        if (!(error instanceof ConfigError) || error.field !== "container") throw error;
        await this.#store.ensureContainer(error);
        return await this.#store.createHeartbeat(what, heartbeat, metadata, timeoutMs);
      }
    };
    const created = await boundedCall(create(), {
      signal: options.signal,
      // Given up on: a heartbeat created after all is deleted, not left to be judged stale.
      onAbandoned: (late) => {
        void late
          .then(() => this.#store.deleteBlob("could not end the session", heartbeat))
          .catch(() => undefined);
      },
    });
    // REFUSED: the heartbeat exists already, which for a random id means a resend found the
    // first send applied: it is this session's (its ETag is read at the first renewal).
    if (this.#closed) {
      await this.#store.deleteBlob("could not end the session", heartbeat).catch(() => undefined);
      throw new BackendUnavailableError(this.#closedMessage());
    }
    const session = new AzureBlobLeaseSession({
      store: this.#store.bounded(Math.min(this.#store.requestTimeoutMs, ttlMs)),
      prefix: this.prefix,
      ownerId: options.ownerId,
      sessionId,
      ttlMs,
      pollMaxMs: this.#pollMaxMs,
      liveness: this.#liveness,
      wakeups: this.#wakeups,
      onClose: (s) => this.#sessions.delete(s),
      ...(created === REFUSED ? {} : { heartbeatEtag: created }),
    });
    this.#sessions.add(session);
    return session;
  }

  /** The container client every request goes through (yours, when you passed one). */
  get containerClient(): AzureContainerClientLike {
    return this.#store.container;
  }

  #closedMessage(): string {
    return this.#store.context(
      "this Azure Blob backend is closed; create a new one to reach the container again",
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#sessions].map((s) => s.close()));
  }
}

/** The host (and port, when not the scheme's) of the container URL `where`: no user info. */
function hostOf(where: string): string | undefined {
  try {
    const host = new URL(where).host;
    return host === "" ? undefined : host;
  } catch {
    return undefined;
  }
}
