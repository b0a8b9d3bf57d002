import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { boundedCall, ConfigError } from "@baton/core";
import { createLockTable } from "./create-lock-table.js";
import type { DynamoDBClientLike } from "./dynamodb-client.js";
import { dynamodbContext, isConditionFailed, toBatonError } from "./dynamodb-errors.js";

/**
 * The part of the AWS SDK's client the backend calls, with the SDK's own types (each command's
 * output): a {@link DynamoDBClientLike} is one, by the shape it was accepted for.
 */
export type SdkClient = Pick<DynamoDBClient, "send">;

/** Options of one {@link DynamoDBTable.call}. */
export interface CallOptions<T> {
  /** Gives up when it aborts (with its reason). */
  readonly signal?: AbortSignal | undefined;
  /** Bound of this call, in ms (default: the backend's request timeout). */
  readonly timeoutMs?: number;
  /**
   * Receives a call given up on, instead of having it aborted: a write whose outcome matters
   * (a grant) is followed to its end.
   */
  readonly onAbandoned?: (late: Promise<T>) => void;
}

/**
 * The calls to one table: each bounded by the request timeout, its errors mapped by
 * `toBatonError` with the table and endpoint in the message (except
 * `ConditionalCheckFailedException`, which the caller reads as an answer), and, with
 * `createTable`, the table created when the first call finds it missing.
 *
 * A call given up on is aborted when the client was passed in; a client the backend built
 * ends such a request itself (its `requestTimeout` throws), so its calls carry no abort
 * signal.
 */
export class DynamoDBTable {
  readonly client: SdkClient;
  readonly #given: DynamoDBClientLike;
  readonly name: string;
  /** Where the calls go, for messages. */
  readonly endpoint: string;
  readonly requestTimeoutMs: number;
  readonly #createTable: boolean;
  /** Whether a call given up on is aborted through its own signal (a client passed in). */
  readonly #abortAbandoned: boolean;
  #creating: Promise<void> | undefined;

  constructor(
    client: DynamoDBClientLike,
    name: string,
    endpoint: string,
    requestTimeoutMs: number,
    createTable: boolean,
    abortAbandoned = true,
  ) {
    this.#given = client;
    this.client = client as SdkClient;
    this.name = name;
    this.endpoint = endpoint;
    this.requestTimeoutMs = requestTimeoutMs;
    this.#createTable = createTable;
    this.#abortAbandoned = abortAbandoned;
  }

  /** `what` with the table and endpoint: the context of an error. */
  context(what: string): string {
    return dynamodbContext(what, this.name, this.endpoint);
  }

  /** Runs `send` (which passes the abort signal to the client), bounded and mapped. */
  async call<T>(
    send: (abortSignal: AbortSignal | undefined) => Promise<T>,
    what: string,
    options: CallOptions<T> = {},
  ): Promise<T> {
    try {
      return await this.#bounded(send, what, options);
    } catch (error) {
      if (!this.#createTable || !(error instanceof ConfigError) || !isMissingTable(error)) {
        throw error;
      }
      this.#creating ??= createLockTable(this.#given, this.name).finally(() => {
        this.#creating = undefined;
      });
      await this.#creating;
      return await this.#bounded(send, what, options);
    }
  }

  #bounded<T>(
    send: (abortSignal: AbortSignal | undefined) => Promise<T>,
    what: string,
    options: CallOptions<T>,
  ): Promise<T> {
    // Hot path: see docs/hot-path.md, "DynamoDB".
    const controller = this.#abortAbandoned ? new AbortController() : undefined;
    const context = this.context(what);
    const { onAbandoned } = options;
    return boundedCall(send(controller?.signal), {
      timeoutMs: options.timeoutMs ?? this.requestTimeoutMs,
      signal: options.signal,
      what: context,
      // A condition that did not hold is an answer, not a failure: it reaches the caller as is.
      mapError: (error) => (isConditionFailed(error) ? error : toBatonError(error, context)),
      onAbandoned:
        onAbandoned ??
        ((late) => {
          controller?.abort();
          late.catch(() => undefined);
        }),
    });
  }
}

function isMissingTable(error: ConfigError): boolean {
  return (error.cause as { name?: unknown } | undefined)?.name === "ResourceNotFoundException";
}
