import {
  AuthenticationError,
  BackendUnavailableError,
  BatonError,
  ConfigError,
  SessionLostError,
} from "@baton/core";

/** How a context names the table and endpoint a call went to, after what was being done. */
const AT_TABLE = " (DynamoDB table ";

/**
 * The context of a call for {@link toBatonError}: what was being done, the table and where it
 * is, `could not acquire "job" (DynamoDB table "locks" at 127.0.0.1:8000)`.
 */
export function dynamodbContext(what: string, table: string, endpoint: string): string {
  return `${what}${AT_TABLE}"${table}" at ${endpoint})`;
}

/** Error names of the AWS SDK that mean "slow down" or "try again": the store is busy. */
const TRANSIENT = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "LimitExceededException",
  "InternalServerError",
  "InternalFailure",
  "ServiceUnavailable",
  "ServiceUnavailableException",
  "TransactionConflictException",
  "TimeoutError",
  "RequestTimeout",
  "RequestTimeoutException",
  "AbortError",
]);

/** Error names of DynamoDB's answer to credentials it refused: retrying cannot help. */
const REFUSED_CREDENTIALS = new Set([
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "MissingAuthenticationTokenException",
  "MissingAuthenticationToken",
  "AccessDeniedException",
  "IncompleteSignatureException",
  "ExpiredTokenException",
  "InvalidClientTokenId",
]);

/** Error names that mean no credentials were found here (none sent): retrying cannot help. */
const CREDENTIALS = new Set(["CredentialsProviderError"]);

/**
 * Maps an error of the AWS SDK's DynamoDB client, met while doing `context` (from
 * {@link dynamodbContext}, so the message names the table and endpoint), to Baton's named
 * errors: a `BatonError` passes through; a missing table (`ResourceNotFoundException`) is a
 * `ConfigError` on `table` that says how to create it; an item or key the table's schema
 * refuses (`ValidationException`) is a `ConfigError` on `table`; credentials DynamoDB refused
 * (unknown, wrong, expired or not allowed) are an `AuthenticationError` on `credentials`;
 * credentials not found here are a `ConfigError` on `credentials`, as is a missing region;
 * throttling, server errors, timeouts and network failures are a `BackendUnavailableError`
 * (transient: core retries them). Anything else is a `BackendUnavailableError` too, never
 * "held".
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const name = errorName(error);
  const detail = errorDetail(error);
  if (name === "ResourceNotFoundException") {
    return new ConfigError(
      "table",
      `${context}: the table does not exist (${detail}); create it with createLockTable() or let the backend create it (createTable: true, or ?createTable=true in the URL)`,
      { cause: error },
    );
  }
  if (name === "ValidationException") {
    return new ConfigError(
      "table",
      `${context}: DynamoDB refused the request (${detail}); the table needs a string partition key "pk" and no sort key`,
      { cause: error },
    );
  }
  if (REFUSED_CREDENTIALS.has(name)) {
    return new AuthenticationError(
      "credentials",
      `${context}: DynamoDB refused the credentials (${detail}); check the access key id and secret (in the URL as dynamodb://KEY:SECRET@host, on your own client, or in the AWS SDK's default chain) and that they may use the table`,
      { cause: error },
    );
  }
  if (CREDENTIALS.has(name) || /credential/i.test(detail)) {
    return new ConfigError(
      "credentials",
      `${context}: DynamoDB refused the credentials or none were found (${detail}); give them in the URL (dynamodb://KEY:SECRET@host), on your own client, or through the AWS SDK's default chain (environment, profile, role)`,
      { cause: error },
    );
  }
  if (/region is missing/i.test(detail)) {
    return new ConfigError(
      "region",
      `${context}: no AWS region (${detail}); give ?region= in the URL, the region option, or AWS_REGION`,
      { cause: error },
    );
  }
  if (TRANSIENT.has(name)) {
    return new BackendUnavailableError(
      `${context}: ${detail}; DynamoDB is busy or did not answer`,
      {
        cause: error,
      },
    );
  }
  return new BackendUnavailableError(
    `${context}: ${detail}; check that DynamoDB is reachable there`,
    { cause: error },
  );
}

/** The session item is gone: closed, or found expired by another client. */
export function sessionGone(context: string): SessionLostError {
  return new SessionLostError(
    `${context}: the session item is gone (closed, or another client saw no renewal for a whole TTL and ended it); its locks are lost`,
  );
}

/** True when `error` is DynamoDB's answer to a condition that did not hold. */
export function isConditionFailed(error: unknown): boolean {
  return errorName(error) === "ConditionalCheckFailedException";
}

function errorName(error: unknown): string {
  if (typeof error !== "object" || error === null) return "";
  const e = error as { name?: unknown; code?: unknown };
  return typeof e.name === "string" ? e.name : typeof e.code === "string" ? e.code : "";
}

/** The error's message, with a network error's code: `connect ECONNREFUSED 127.0.0.1:1`. */
function errorDetail(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const name = errorName(error);
  const message = error.message.replace(/\.$/, "");
  const code = (error as { code?: unknown }).code;
  if (message === "" || message === "UnknownError") return name || "unknown error";
  if (typeof code === "string" && !message.includes(code)) return `${message} (${code})`;
  return name !== "" && name !== "Error" && !message.startsWith(name)
    ? `${name}: ${message}`
    : message;
}
