import type { BackendSession } from "@baton/core";

/**
 * What the DynamoDB backend needs from a client you pass as
 * {@link DynamoDBBackendOptions.client} or to {@link createLockTable}: a `DynamoDBClient` of
 * `@aws-sdk/client-dynamodb` (version 3) has this shape. It is described by shape, so that
 * Baton's published types never load the AWS SDK's: a release of the SDK whose own
 * declarations break cannot break your build through Baton.
 *
 * The backend never destroys a client you pass: you close it when you are done with it.
 */
export interface DynamoDBClientLike {
  /**
   * Sends one command (`GetItemCommand`, `UpdateItemCommand`, `PutItemCommand`,
   * `DeleteItemCommand`, `BatchGetItemCommand`, `ScanCommand`, `CreateTableCommand`,
   * `DescribeTableCommand`) and resolves its output. `options.abortSignal` aborts a request
   * the backend gave up on (its request timeout ran out).
   */
  send(command: object, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
}

/** A session of the DynamoDB backend: one session item, renewed once per interval. */
export interface DynamoDBSession extends BackendSession {
  /** The session's id (random): the end of its item's key, and the holder named in its locks. */
  readonly sessionId: string;
}
