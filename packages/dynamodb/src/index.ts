/**
 * `@baton/dynamodb`: Baton's DynamoDB backend (one session item renewed per interval, lock
 * items granted by conditional writes, fencing tokens from a counter raised by the same
 * write, expiry judged on each client's own monotonic clock). Importing it registers the
 * `dynamodb://` scheme with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/dynamodb
 */
import { registerBackend } from "@baton/core";
import { DYNAMODB_GUARANTEES, DynamoDBBackend } from "./dynamodb-backend.js";
import { dynamodbOptionsFromUrl } from "./dynamodb-options.js";

export { type CreateLockTableOptions, createLockTable } from "./create-lock-table.js";
export { DYNAMODB_GUARANTEES, DynamoDBBackend } from "./dynamodb-backend.js";
export type { DynamoDBClientLike, DynamoDBSession } from "./dynamodb-client.js";
export {
  DEFAULT_POLL_MAX_MS,
  DEFAULT_PREFIX,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type DynamoDBBackendOptions,
  type DynamoDBCredentials,
  dynamodbOptionsFromUrl,
  MIN_TTL_MS,
  POLL_MIN_MS,
} from "./dynamodb-options.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("dynamodb", (url) => new DynamoDBBackend(dynamodbOptionsFromUrl(url)), {
  checkUrl: dynamodbOptionsFromUrl,
  guarantees: DYNAMODB_GUARANTEES,
});
