import { randomUUID } from "node:crypto";
import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import {
  type BackendSession,
  BackendUnavailableError,
  ConfigError,
  type Guarantees,
  type LockBackend,
  type OpenSessionOptions,
} from "@baton/core";
import { isConditionFailed } from "./dynamodb-errors.js";
import { sessionKey } from "./dynamodb-keys.js";
import {
  type DynamoDBBackendOptions,
  MIN_TTL_MS,
  POLL_MIN_MS,
  resolveDynamoDBOptions,
} from "./dynamodb-options.js";
import { DynamoDBItemSession } from "./dynamodb-session.js";
import { DynamoDBTable } from "./dynamodb-table.js";
import { ExpiryObserver } from "./expiry-observer.js";
import { openRequest } from "./lock-requests.js";

/**
 * What the DynamoDB backend guarantees: fencing tokens that rise with every grant (a counter
 * in the lock item, raised by the same conditional write that grants), no FIFO (waiters poll,
 * and look again within 50 ms once they saw the lock change hands; whoever writes first after
 * a release wins), consensus (DynamoDB's conditional writes and
 * strongly consistent reads are linearizable per item), exclusion across processes, durable
 * records, inspection (a bounded `Scan` per page) and forced release of one grant (the lock
 * item freed in place, the reason left in the holder's session item for its next renewal).
 */
export const DYNAMODB_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: false,
  waiters: "poll-resets",
  tokenCounter: "per-key",
  consensus: true,
  crossProcess: true,
  records: true,
  semaphores: false,
  inspection: true,
  forceRelease: "grant",
};

/**
 * The DynamoDB backend (`dynamodb://host:port/table` or `dynamodb:///table?region=...`): one
 * session item per session, renewed by one conditional update per interval however many
 * locks it holds; one lock item per lock, granted by a conditional update that also raises
 * its fencing counter; expiry judged on each client's own monotonic clock (a session whose
 * renewal counter stays the same for a whole TTL is ended with a delete conditional on that
 * counter), never by comparing clocks.
 *
 * @example
 * const backend = new DynamoDBBackend({ table: "locks", region: "eu-west-1" });
 * const coordinator = createCoordinator({ backend, ttlMs: 10_000 });
 */
export class DynamoDBBackend implements LockBackend {
  readonly kind = "dynamodb";
  readonly guarantees = DYNAMODB_GUARANTEES;
  /** The table's name. */
  readonly table: string;
  /** Prefix of every item key. */
  readonly prefix: string;
  /**
   * Where the calls go, named in core's messages about the backend: the `endpoint` option's
   * `host:port` (e.g. `127.0.0.1:8000`), or the region's AWS host
   * (`dynamodb.eu-west-1.amazonaws.com`); never the access key nor the secret. Undefined
   * for a given `client`, or when the region comes from the AWS SDK's chain.
   */
  readonly endpoint: string | undefined;
  readonly #table: DynamoDBTable;
  readonly #destroyClient: (() => void) | undefined;
  readonly #pollMaxMs: number;
  readonly #observer = new ExpiryObserver();
  readonly #sessions = new Set<DynamoDBItemSession>();
  #closed = false;

  /** Throws `ConfigError` for bad options, before any I/O. */
  constructor(options: DynamoDBBackendOptions) {
    const resolved = resolveDynamoDBOptions(options);
    this.table = resolved.table;
    this.prefix = resolved.prefix;
    this.endpoint = endpointOf(options);
    this.#table = new DynamoDBTable(
      resolved.client,
      resolved.table,
      resolved.endpointLabel,
      resolved.requestTimeoutMs,
      resolved.createTable,
      // A client built here ends a request it was given up on by itself (see the options).
      resolved.destroyClient === undefined,
    );
    this.#destroyClient = resolved.destroyClient;
    this.#pollMaxMs = resolved.pollMaxMs;
  }

  /**
   * Writes the session's item (one conditional put). `ttlMs` must be at least
   * {@link MIN_TTL_MS}; the session's `ttlMs` is the one asked for.
   */
  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    const { ttlMs, ownerId, signal } = options;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < MIN_TTL_MS) {
      throw new ConfigError(
        "ttlMs",
        `must be a whole number of milliseconds, at least ${MIN_TTL_MS} for DynamoDB, got ${String(ttlMs)}`,
      );
    }
    if (signal?.aborted) throw signal.reason;
    if (this.#closed) throw new BackendUnavailableError(this.#closedMessage());
    const sessionId = randomUUID();
    const key = sessionKey(this.prefix, sessionId);
    const put = new PutItemCommand(openRequest(this.table, key, ownerId, ttlMs));
    try {
      await this.#table.call(
        (abortSignal) => this.#table.client.send(put, { abortSignal }),
        "could not open a session",
        { signal },
      );
    } catch (error) {
      if (isConditionFailed(error)) {
        throw new BackendUnavailableError(
          this.#table.context(`could not open a session: its random id ${sessionId} is taken`),
        );
      }
      throw error;
    }
    const session = new DynamoDBItemSession({
      table: this.#table,
      prefix: this.prefix,
      ownerId,
      sessionId,
      ttlMs,
      observer: this.#observer,
      pollMinMs: POLL_MIN_MS,
      pollMaxMs: Math.min(this.#pollMaxMs, Math.max(POLL_MIN_MS, Math.floor(ttlMs / 4))),
      onClose: (s) => this.#sessions.delete(s),
    });
    if (this.#closed) {
      await session.close().catch(() => undefined);
      throw new BackendUnavailableError(this.#closedMessage());
    }
    this.#sessions.add(session);
    return session;
  }

  #closedMessage(): string {
    return `this DynamoDB backend (table "${this.table}" at ${this.#table.endpoint}) is closed; create a new one to reach DynamoDB again`;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await Promise.allSettled([...this.#sessions].map((s) => s.close()));
    } finally {
      this.#destroyClient?.();
    }
  }
}

/** {@link DynamoDBBackend.endpoint} of options that passed `resolveDynamoDBOptions`. */
function endpointOf(options: DynamoDBBackendOptions): string | undefined {
  if (options.client !== undefined) return undefined;
  if (options.endpoint !== undefined) return new URL(options.endpoint).host;
  const region = options.region;
  if (region === undefined) return undefined;
  // AWS's own endpoint of the region; the regions in China are under amazonaws.com.cn.
  return `dynamodb.${region}.amazonaws.com${region.startsWith("cn-") ? ".cn" : ""}`;
}
