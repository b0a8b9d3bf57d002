import {
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { BackendUnavailableError, boundedCall, ConfigError, sleep, systemClock } from "@baton/core";
import { dynamodbContext, isConditionFailed, toBatonError } from "./dynamodb-errors.js";
import { PARTITION_KEY } from "./dynamodb-keys.js";

/** Options of {@link createLockTable}. */
export interface CreateLockTableOptions {
  /** How long to wait for the table to become active, in ms (default 60000). */
  readonly timeoutMs?: number;
}

/** Pause between looks at a table being created, in ms. */
const TABLE_POLL_MS = 200;

/**
 * Creates a table Baton can use: string partition key `pk`, no sort key, on-demand capacity
 * (`PAY_PER_REQUEST`), and waits until it is `ACTIVE`. A table of that name that exists
 * already is left as it is. The same as
 * `aws dynamodb create-table --table-name NAME --attribute-definitions AttributeName=pk,AttributeType=S --key-schema AttributeName=pk,KeyType=HASH --billing-mode PAY_PER_REQUEST`.
 */
export async function createLockTable(
  client: DynamoDBClient,
  table: string,
  options: CreateLockTableOptions = {},
): Promise<void> {
  const deadline = performance.now() + (options.timeoutMs ?? 60_000);
  try {
    await client.send(
      new CreateTableCommand({
        TableName: table,
        AttributeDefinitions: [{ AttributeName: PARTITION_KEY, AttributeType: "S" }],
        KeySchema: [{ AttributeName: PARTITION_KEY, KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
  } catch (error) {
    if ((error as { name?: unknown }).name !== "ResourceInUseException") {
      throw toBatonError(error, `could not create the DynamoDB table "${table}"`);
    }
  }
  for (;;) {
    const described = await client
      .send(new DescribeTableCommand({ TableName: table }))
      .catch((error: unknown) => {
        throw toBatonError(error, `could not describe the DynamoDB table "${table}"`);
      });
    if (described.Table?.TableStatus === "ACTIVE") return;
    if (performance.now() > deadline) {
      throw new BackendUnavailableError(
        `the DynamoDB table "${table}" is not active after ${options.timeoutMs ?? 60_000} ms (status ${described.Table?.TableStatus ?? "unknown"})`,
      );
    }
    await sleep(systemClock, TABLE_POLL_MS);
  }
}

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
 * The calls to one table: each bounded by the request timeout (a call given up on is
 * aborted), its errors mapped by `toBatonError` with the table and endpoint in the message
 * (except `ConditionalCheckFailedException`, which the caller reads as an answer),
 * and, with `createTable`, the table created when the first call finds it missing.
 */
export class DynamoDBTable {
  readonly client: DynamoDBClient;
  readonly name: string;
  /** Where the calls go, for messages. */
  readonly endpoint: string;
  readonly requestTimeoutMs: number;
  readonly #createTable: boolean;
  #creating: Promise<void> | undefined;

  constructor(
    client: DynamoDBClient,
    name: string,
    endpoint: string,
    requestTimeoutMs: number,
    createTable: boolean,
  ) {
    this.client = client;
    this.name = name;
    this.endpoint = endpoint;
    this.requestTimeoutMs = requestTimeoutMs;
    this.#createTable = createTable;
  }

  /** `what` with the table and endpoint: the context of an error. */
  context(what: string): string {
    return dynamodbContext(what, this.name, this.endpoint);
  }

  /** Runs `send` (which passes the abort signal to the client), bounded and mapped. */
  async call<T>(
    send: (abortSignal: AbortSignal) => Promise<T>,
    what: string,
    options: CallOptions<T> = {},
  ): Promise<T> {
    try {
      return await this.#bounded(send, what, options);
    } catch (error) {
      if (!this.#createTable || !(error instanceof ConfigError) || !isMissingTable(error)) {
        throw error;
      }
      this.#creating ??= createLockTable(this.client, this.name).finally(() => {
        this.#creating = undefined;
      });
      await this.#creating;
      return await this.#bounded(send, what, options);
    }
  }

  #bounded<T>(
    send: (abortSignal: AbortSignal) => Promise<T>,
    what: string,
    options: CallOptions<T>,
  ): Promise<T> {
    const controller = new AbortController();
    const context = this.context(what);
    const { onAbandoned } = options;
    return boundedCall(send(controller.signal), {
      timeoutMs: options.timeoutMs ?? this.requestTimeoutMs,
      signal: options.signal,
      what: context,
      // A condition that did not hold is an answer, not a failure: it reaches the caller as is.
      mapError: (error) => (isConditionFailed(error) ? error : toBatonError(error, context)),
      onAbandoned:
        onAbandoned ??
        ((late) => {
          controller.abort();
          late.catch(() => undefined);
        }),
    });
  }
}

function isMissingTable(error: ConfigError): boolean {
  return (error.cause as { name?: unknown } | undefined)?.name === "ResourceNotFoundException";
}
