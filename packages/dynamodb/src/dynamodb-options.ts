import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { type BackendUrl, ConfigError } from "@baton/core";
import type { DynamoDBClientLike } from "./dynamodb-client.js";

/** Options of {@link DynamoDBBackend}. Give `table`, and `client` or the connection fields. */
export interface DynamoDBBackendOptions {
  /** The table holding every lock, session and record item (string partition key `pk`). */
  readonly table: string;
  /**
   * A client you built yourself (credentials, retries, HTTP options): a `DynamoDBClient` of
   * `@aws-sdk/client-dynamodb`. The backend does not destroy it. Without it the backend
   * builds one from `endpoint`, `region` and `credentials`.
   */
  readonly client?: DynamoDBClientLike;
  /**
   * Where DynamoDB is, e.g. `http://127.0.0.1:8000` for DynamoDB Local or dynalite. Default:
   * the AWS SDK's endpoint for the region.
   */
  readonly endpoint?: string;
  /** The AWS region. Default: the AWS SDK's chain (`AWS_REGION`, the profile). */
  readonly region?: string;
  /**
   * Access key and secret. Default: the AWS SDK's default credential chain (environment,
   * profile, SSO, container or instance role).
   */
  readonly credentials?: DynamoDBCredentials;
  /** Prepended to every item's key, so several apps can share one table. Default `""`. */
  readonly prefix?: string;
  /** Bound on each DynamoDB call, in ms (default {@link DEFAULT_REQUEST_TIMEOUT_MS}). */
  readonly requestTimeoutMs?: number;
  /**
   * Creates the table (on-demand capacity, partition key `pk`) when the first call finds it
   * missing, and waits until it is active. Default `false`: a missing table is a
   * `ConfigError` that says so.
   */
  readonly createTable?: boolean;
  /**
   * The longest pause between two looks at a held lock while waiting for it, in ms (default
   * {@link DEFAULT_POLL_MAX_MS}). Looks start {@link POLL_MIN_MS} apart and back off with
   * jitter up to this.
   */
  readonly pollMaxMs?: number;
}

/** Static credentials for {@link DynamoDBBackendOptions.credentials}. */
export interface DynamoDBCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** Options after validation. */
export interface ResolvedDynamoDBOptions {
  readonly client: DynamoDBClientLike;
  /** Closes the client when the backend built it; `undefined` for a client you passed. */
  readonly destroyClient: (() => void) | undefined;
  readonly table: string;
  /** Where the calls go, for messages: `host:port`, or `region eu-west-1`. */
  readonly endpointLabel: string;
  readonly prefix: string;
  readonly requestTimeoutMs: number;
  readonly createTable: boolean;
  readonly pollMaxMs: number;
}

/** Default bound on each DynamoDB call, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
/** Default key prefix: none. */
export const DEFAULT_PREFIX = "";
/** Default longest pause between looks at a held lock, in ms. */
export const DEFAULT_POLL_MAX_MS = 500;
/** The first pause between looks at a held lock is between half this and this, in ms. */
export const POLL_MIN_MS = 50;
/** The shortest session TTL the backend accepts, in ms. */
export const MIN_TTL_MS = 500;

const OPTION_KEYS = [
  "table",
  "client",
  "endpoint",
  "region",
  "credentials",
  "prefix",
  "requestTimeoutMs",
  "createTable",
  "pollMaxMs",
];
const URL_PARAMS = ["region", "tls", "prefix", "requestTimeoutMs", "createTable", "pollMaxMs"];

/** Checks options and builds the client; throws `ConfigError` naming the field, before any I/O. */
export function resolveDynamoDBOptions(options: DynamoDBBackendOptions): ResolvedDynamoDBOptions {
  if (options === null || typeof options !== "object") {
    throw new ConfigError("options", "pass { table } with { client } or { endpoint, region }");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) {
      throw new ConfigError(
        `options.${key}`,
        `is not a DynamoDB backend option (${OPTION_KEYS.join(", ")})`,
      );
    }
  }
  const table = options.table;
  if (typeof table !== "string" || !/^[a-zA-Z0-9_.-]{3,255}$/.test(table)) {
    throw new ConfigError(
      "table",
      "must be a DynamoDB table name: 3 to 255 letters, digits, _ . or -",
    );
  }
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  if (typeof prefix !== "string") throw new ConfigError("prefix", "must be a string");
  const requestTimeoutMs = integerIn(
    "requestTimeoutMs",
    options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    100,
    600_000,
  );
  const pollMaxMs = integerIn(
    "pollMaxMs",
    options.pollMaxMs ?? DEFAULT_POLL_MAX_MS,
    POLL_MIN_MS,
    60_000,
  );
  const createTable = options.createTable ?? false;
  if (typeof createTable !== "boolean")
    throw new ConfigError("createTable", "must be true or false");
  const common = { table, prefix, requestTimeoutMs, createTable, pollMaxMs };
  if (options.client !== undefined) {
    if (!isDynamoDBClient(options.client)) {
      throw new ConfigError(
        "client",
        "must be a DynamoDBClient from @aws-sdk/client-dynamodb (an object with a send method)",
      );
    }
    for (const field of ["endpoint", "region", "credentials"] as const) {
      if (options[field] !== undefined) {
        throw new ConfigError(field, `set ${field} on the DynamoDBClient you pass, not here`);
      }
    }
    return {
      ...common,
      client: options.client,
      destroyClient: undefined,
      endpointLabel: "your DynamoDBClient's endpoint",
    };
  }
  const endpoint = checkEndpoint(options.endpoint);
  const region = options.region;
  if (region !== undefined && (typeof region !== "string" || !/^[a-z0-9-]+$/.test(region))) {
    throw new ConfigError(
      "region",
      `must be an AWS region such as "eu-west-1", got ${String(region)}`,
    );
  }
  const credentials = checkCredentials(options.credentials);
  const client = new DynamoDBClient({
    ...(endpoint === undefined ? {} : { endpoint: endpoint.href }),
    ...(region === undefined ? {} : { region }),
    ...(credentials === undefined ? {} : { credentials }),
    // Core retries what is transient, within its own bounds; the SDK makes one attempt.
    maxAttempts: 1,
    // A request given up on (after requestTimeoutMs) is ended by the SDK, not by an abort
    // signal per call: it throws once requestTimeout has passed, freeing its socket.
    requestHandler: {
      connectionTimeout: requestTimeoutMs,
      requestTimeout: requestTimeoutMs * 2,
      throwOnRequestTimeout: true,
    },
  });
  const endpointLabel =
    endpoint === undefined ? `region ${region ?? "from the AWS SDK's chain"}` : endpoint.host;
  return { ...common, client, destroyClient: () => client.destroy(), endpointLabel };
}

function integerIn(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(
      field,
      `must be an integer between ${min} and ${max} (milliseconds), got ${String(value)}`,
    );
  }
  return value;
}

function checkEndpoint(endpoint: unknown): URL | undefined {
  if (endpoint === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = typeof endpoint === "string" ? new URL(endpoint) : undefined;
  } catch {
    url = undefined;
  }
  if (
    url === undefined ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.username !== "" ||
    url.password !== ""
  ) {
    throw new ConfigError(
      "endpoint",
      "must be an http:// or https:// URL without credentials, e.g. http://127.0.0.1:8000",
    );
  }
  return url;
}

function checkCredentials(credentials: unknown): DynamoDBCredentials | undefined {
  if (credentials === undefined) return undefined;
  const c = credentials as Partial<DynamoDBCredentials> | null;
  if (
    typeof c !== "object" ||
    c === null ||
    typeof c.accessKeyId !== "string" ||
    c.accessKeyId === "" ||
    typeof c.secretAccessKey !== "string" ||
    c.secretAccessKey === "" ||
    (c.sessionToken !== undefined && typeof c.sessionToken !== "string")
  ) {
    throw new ConfigError(
      "credentials",
      "must be { accessKeyId, secretAccessKey, sessionToken? } with non-empty strings",
    );
  }
  return c as DynamoDBCredentials;
}

/**
 * Options from `dynamodb://[KEY:SECRET@]host[:port]/TABLE[?region=eu-west-1&tls=false&...]`,
 * or `dynamodb:///TABLE?region=eu-west-1` for the AWS SDK's endpoint of the region. The path
 * names the table. Parameters: `region`, `tls` (default `true`: `https://`; `false` for a
 * local server), `prefix`, `requestTimeoutMs`, `createTable`, `pollMaxMs`. A user name and
 * password are an access key id and secret; without them the AWS SDK's default chain finds
 * the credentials.
 */
export function dynamodbOptionsFromUrl(url: BackendUrl): DynamoDBBackendOptions {
  if (url.hosts.length > 1) {
    throw new ConfigError("url", "a DynamoDB URL names one endpoint host (or none, for AWS's)");
  }
  for (const name of url.searchParams.keys()) {
    if (!URL_PARAMS.includes(name)) {
      throw new ConfigError(
        "url",
        `unknown DynamoDB URL parameter "${name}" (use ${URL_PARAMS.join(", ")})`,
      );
    }
  }
  const table = url.pathname.replace(/^\//, "");
  if (table === "" || table.includes("/")) {
    throw new ConfigError(
      "url",
      "a DynamoDB URL names its table as the path, e.g. dynamodb://127.0.0.1:8000/locks?tls=false",
    );
  }
  if ((url.username === "") !== (url.password === "")) {
    throw new ConfigError(
      "url",
      "give both an access key id and a secret (dynamodb://KEY:SECRET@host/table), or neither",
    );
  }
  const tls = booleanParam(url.searchParams, "tls") ?? true;
  const host = url.hosts[0];
  if (host === undefined && !tls) {
    throw new ConfigError("url", '"tls=false" needs a host: AWS\'s endpoints take https only');
  }
  const endpoint =
    host === undefined
      ? undefined
      : `${tls ? "https" : "http"}://${host.host.includes(":") ? `[${host.host}]` : host.host}${host.port === undefined ? "" : `:${host.port}`}`;
  const region = url.searchParams.get("region");
  const prefix = url.searchParams.get("prefix");
  const createTable = booleanParam(url.searchParams, "createTable");
  const requestTimeoutMs = numberParam(url.searchParams, "requestTimeoutMs");
  const pollMaxMs = numberParam(url.searchParams, "pollMaxMs");
  return {
    table,
    ...(endpoint === undefined ? {} : { endpoint }),
    ...(region === null ? {} : { region }),
    ...(url.username === ""
      ? {}
      : { credentials: { accessKeyId: url.username, secretAccessKey: url.password } }),
    ...(prefix === null ? {} : { prefix }),
    ...(createTable === undefined ? {} : { createTable }),
    ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
    ...(pollMaxMs === undefined ? {} : { pollMaxMs }),
  };
}

function booleanParam(params: URLSearchParams, name: string): boolean | undefined {
  const text = params.get(name);
  if (text === null) return undefined;
  if (text === "true" || text === "1") return true;
  if (text === "false" || text === "0") return false;
  throw new ConfigError("url", `the parameter "${name}" must be true or false, got "${text}"`);
}

function numberParam(params: URLSearchParams, name: string): number | undefined {
  const text = params.get(name);
  if (text === null) return undefined;
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value)) {
    throw new ConfigError(name, `must be a number of milliseconds, got "${text}"`);
  }
  return value;
}

/**
 * Whether `value` has the shape of a {@link DynamoDBClientLike}. Checked by shape, not
 * `instanceof`, so a client from the app's own copy of the AWS SDK is accepted.
 */
function isDynamoDBClient(value: unknown): value is DynamoDBClientLike {
  const client = value as { send?: unknown } | null;
  return typeof client === "object" && client !== null && typeof client.send === "function";
}
