import {
  BlobServiceClient,
  ContainerClient,
  type StoragePipelineOptions,
  StorageSharedKeyCredential,
} from "@azure/storage-blob";
import { type BackendUrl, ConfigError } from "@baton/core";
import type { AzureBlobServiceClientLike, AzureContainerClientLike } from "./azure-blob-clients.js";

/**
 * Options of {@link AzureBlobBackend}. Give exactly one way to reach the container:
 * `containerClient`; or `serviceClient` with `container`; or `connectionString` with
 * `container`; or `endpoint` (with `accountName` and `accountKey`, or `sasToken`) with
 * `container`.
 */
export interface AzureBlobBackendOptions {
  /**
   * A container client you built yourself (any credential): a `ContainerClient` of
   * `@azure/storage-blob`. The backend does not own it.
   */
  readonly containerClient?: AzureContainerClientLike;
  /**
   * A service client you built yourself (a `BlobServiceClient` of `@azure/storage-blob`); the
   * backend uses its container `container`.
   */
  readonly serviceClient?: AzureBlobServiceClientLike;
  /** A storage connection string (`DefaultEndpointsProtocol=...;AccountName=...;AccountKey=...`). */
  readonly connectionString?: string;
  /**
   * The Blob service endpoint: `https://<account>.blob.core.windows.net`, or a path-style one
   * such as Azurite's `http://127.0.0.1:10000/devstoreaccount1`.
   */
  readonly endpoint?: string;
  /** The storage account name (with `endpoint` and `accountKey`). */
  readonly accountName?: string;
  /** The storage account key, base64 (with `endpoint` and `accountName`). */
  readonly accountKey?: string;
  /** A SAS token with read, write and delete permissions on blobs (with `endpoint`). */
  readonly sasToken?: string;
  /** The container that holds the lock, session and record blobs. */
  readonly container?: string;
  /**
   * Prepended to every blob name the backend writes (default {@link DEFAULT_PREFIX}, `""`).
   * Use one per application sharing a container; it should end with `/`.
   */
  readonly prefix?: string;
  /**
   * Create the container when it does not exist (default {@link DEFAULT_CREATE_CONTAINER},
   * true). With `false`, a missing container is a `ConfigError` naming `container`.
   */
  readonly createContainer?: boolean;
  /** Bound on each Azure request, in ms (default {@link DEFAULT_REQUEST_TIMEOUT_MS}, 5000). */
  readonly requestTimeoutMs?: number;
  /**
   * The longest pause between two looks at a held lock while waiting, in ms (default
   * {@link DEFAULT_POLL_MAX_MS}, 500). Waits start at 25 to 50 ms and double, with jitter.
   */
  readonly pollMaxMs?: number;
}

/** Options after validation. */
export interface ResolvedAzureBlobOptions {
  readonly container: AzureContainerClientLike;
  /** Where the container is, for messages: `http://127.0.0.1:10000/devstoreaccount1/locks`. */
  readonly where: string;
  readonly prefix: string;
  readonly createContainer: boolean;
  readonly requestTimeoutMs: number;
  readonly pollMaxMs: number;
}

/** Default bound on each Azure request, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
/** Default blob name prefix: none. */
export const DEFAULT_PREFIX = "";
/** Default: a missing container is created. */
export const DEFAULT_CREATE_CONTAINER = true;
/** Default longest pause between two looks at a held lock, in ms. */
export const DEFAULT_POLL_MAX_MS = 500;
/** Azurite's (and the Azure Storage Emulator's) account, whose published key is well known. */
export const EMULATOR_ACCOUNT = "devstoreaccount1";
/** The published key of {@link EMULATOR_ACCOUNT}: not a secret, the same in every emulator. */
export const EMULATOR_ACCOUNT_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

const OPTION_KEYS = [
  "containerClient",
  "serviceClient",
  "connectionString",
  "endpoint",
  "accountName",
  "accountKey",
  "sasToken",
  "container",
  "prefix",
  "createContainer",
  "requestTimeoutMs",
  "pollMaxMs",
];
const URL_PARAMS = [
  "key",
  "sasToken",
  "prefix",
  "tls",
  "createContainer",
  "requestTimeoutMs",
  "pollMaxMs",
];

/**
 * Azure container names: 3 to 63 characters, lower-case letters, digits and single hyphens,
 * starting and ending with a letter or digit.
 */
const CONTAINER_NAME = /^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/;

/**
 * The SDK pipeline of the clients the backend builds: no retries of its own (core retries,
 * and every request is bounded by `requestTimeoutMs`).
 */
function pipelineOptions(requestTimeoutMs: number): StoragePipelineOptions {
  return { retryOptions: { maxTries: 1, tryTimeoutInMs: requestTimeoutMs } };
}

/** Checks options and builds the client; throws `ConfigError` naming the field, before any I/O. */
export function resolveAzureBlobOptions(
  options: AzureBlobBackendOptions,
): ResolvedAzureBlobOptions {
  if (options === null || typeof options !== "object") {
    throw new ConfigError("options", "pass { containerClient } or { endpoint, container, ... }");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) {
      throw new ConfigError(
        `options.${key}`,
        `is not an Azure Blob backend option (${OPTION_KEYS.join(", ")})`,
      );
    }
  }
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  if (typeof prefix !== "string" || prefix.length > 256) {
    throw new ConfigError("prefix", "must be a string of at most 256 characters");
  }
  const createContainer = options.createContainer ?? DEFAULT_CREATE_CONTAINER;
  if (typeof createContainer !== "boolean") {
    throw new ConfigError("createContainer", "must be true or false");
  }
  const requestTimeoutMs = checkMs(
    options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    "requestTimeoutMs",
    100,
    600_000,
  );
  const pollMaxMs = checkMs(options.pollMaxMs ?? DEFAULT_POLL_MAX_MS, "pollMaxMs", 50, 60_000);
  const ways = [
    options.containerClient,
    options.serviceClient,
    options.connectionString,
    options.endpoint,
  ].filter((x) => x !== undefined).length;
  if (ways !== 1) {
    throw new ConfigError(
      "containerClient",
      "pass exactly one of containerClient, serviceClient, connectionString and endpoint",
    );
  }
  const rest = { prefix, createContainer, requestTimeoutMs, pollMaxMs };
  if (options.containerClient !== undefined) {
    if (!isContainerClient(options.containerClient)) {
      throw new ConfigError(
        "containerClient",
        "must be a ContainerClient from @azure/storage-blob",
      );
    }
    for (const key of ["container", "accountName", "accountKey", "sasToken"] as const) {
      if (options[key] !== undefined) {
        throw new ConfigError(key, "is set on the ContainerClient you pass, not here");
      }
    }
    return { container: options.containerClient, where: whereOf(options.containerClient), ...rest };
  }
  const container = checkContainer(options.container);
  if (options.serviceClient !== undefined) {
    const service = options.serviceClient as Partial<AzureBlobServiceClientLike> | null;
    if (typeof service?.getContainerClient !== "function") {
      throw new ConfigError(
        "serviceClient",
        "must be a BlobServiceClient from @azure/storage-blob",
      );
    }
    const client = options.serviceClient.getContainerClient(container);
    if (!isContainerClient(client)) {
      throw new ConfigError(
        "serviceClient",
        "must be a BlobServiceClient from @azure/storage-blob (its getContainerClient gave no ContainerClient)",
      );
    }
    return { container: client, where: whereOf(client), ...rest };
  }
  if (options.connectionString !== undefined) {
    if (typeof options.connectionString !== "string" || options.connectionString === "") {
      throw new ConfigError("connectionString", "must be a non-empty string");
    }
    let client: ContainerClient;
    try {
      client = BlobServiceClient.fromConnectionString(
        options.connectionString,
        pipelineOptions(requestTimeoutMs),
      ).getContainerClient(container);
    } catch {
      // The SDK's message may quote the string, key included: never pass it on.
      throw new ConfigError(
        "connectionString",
        "is not a storage connection string (AccountName=...;AccountKey=... or BlobEndpoint=...;SharedAccessSignature=...)",
      );
    }
    return { container: client, where: whereOf(client), ...rest };
  }
  const endpoint = checkEndpoint(options.endpoint as string);
  const url = `${endpoint}/${container}`;
  if (options.sasToken !== undefined) {
    if (options.accountKey !== undefined) {
      throw new ConfigError("sasToken", "give an account key or a SAS token, not both");
    }
    if (typeof options.sasToken !== "string" || options.sasToken === "") {
      throw new ConfigError("sasToken", "must be a non-empty string");
    }
    const sas = options.sasToken.replace(/^\?/, "");
    const client = new ContainerClient(
      `${url}?${sas}`,
      undefined,
      pipelineOptions(requestTimeoutMs),
    );
    return { container: client, where: url, ...rest };
  }
  const accountName = options.accountName;
  if (typeof accountName !== "string" || !/^[a-z0-9]{3,24}$/.test(accountName)) {
    throw new ConfigError(
      "accountName",
      "must be a storage account name (3 to 24 lower-case letters and digits)",
    );
  }
  const accountKey =
    options.accountKey ?? (accountName === EMULATOR_ACCOUNT ? EMULATOR_ACCOUNT_KEY : undefined);
  if (typeof accountKey !== "string" || !/^[A-Za-z0-9+/]+={0,2}$/.test(accountKey)) {
    throw new ConfigError("accountKey", "must be the account's base64 key (or give sasToken)");
  }
  const credential = new StorageSharedKeyCredential(accountName, accountKey);
  const client = new ContainerClient(url, credential, pipelineOptions(requestTimeoutMs));
  return { container: client, where: url, ...rest };
}

function checkMs(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(
      field,
      `must be an integer between ${min} and ${max} (milliseconds), got ${String(value)}`,
    );
  }
  return value;
}

function checkContainer(container: unknown): string {
  if (typeof container !== "string" || !CONTAINER_NAME.test(container)) {
    throw new ConfigError(
      "container",
      "must be an Azure container name: 3 to 63 lower-case letters, digits and single hyphens",
    );
  }
  return container;
}

function checkEndpoint(endpoint: string): string {
  let parsed: URL;
  try {
    parsed = new URL(endpoint);
  } catch {
    throw new ConfigError("endpoint", "must be an http(s) URL of the Blob service");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ConfigError("endpoint", "must be an http(s) URL of the Blob service");
  }
  if (parsed.username !== "" || parsed.password !== "" || parsed.search !== "") {
    throw new ConfigError("endpoint", "must hold no credentials: use accountKey or sasToken");
  }
  return endpoint.replace(/\/+$/, "");
}

/** The container's URL without its query (a SAS token), for messages. */
function whereOf(client: AzureContainerClientLike): string {
  const url = String(client.url);
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

/** Whether `value` looks like a `ContainerClient` (by shape: the app's own copy of the SDK). */
function isContainerClient(value: unknown): value is AzureContainerClientLike {
  const client = value as Partial<AzureContainerClientLike> | null;
  return (
    typeof client === "object" &&
    client !== null &&
    typeof client.getBlockBlobClient === "function" &&
    typeof client.createIfNotExists === "function" &&
    typeof client.url === "string"
  );
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|::1)$/i;

/**
 * Options from an `azblob://` URL:
 *
 * - `azblob://<account>/<container>?key=<account key>`: the account's endpoint in Azure,
 *   `https://<account>.blob.core.windows.net`;
 * - `azblob://<account>@<host>:<port>/<container>`: a path-style endpoint,
 *   `http(s)://<host>:<port>/<account>`, as Azurite serves (`http` for a loopback host,
 *   `https` otherwise; `?tls=true|false` chooses). For `devstoreaccount1`, the emulator's
 *   published key is the default.
 *
 * The key goes in `?key=` (percent-encoded: `+` is `%2B`, `/` is `%2F`, `=` is `%3D`) or as
 * the URL's password; a SAS token in `?sasToken=`. Also `?prefix=`, `?createContainer=false`,
 * `?requestTimeoutMs=`, `?pollMaxMs=`. Connection strings and your own clients are options.
 */
export function azureBlobOptionsFromUrl(url: BackendUrl): AzureBlobBackendOptions {
  if (url.hosts.length !== 1) {
    throw new ConfigError(
      "url",
      "an azblob URL names one account or host, e.g. azblob://myaccount/locks or azblob://devstoreaccount1@127.0.0.1:10000/locks",
    );
  }
  for (const name of url.searchParams.keys()) {
    if (!URL_PARAMS.includes(name)) {
      throw new ConfigError(
        "url",
        `unknown azblob URL parameter "${name}" (use ${URL_PARAMS.join(", ")})`,
      );
    }
  }
  const container = url.pathname.replace(/^\//, "");
  if (container === "" || container.includes("/")) {
    throw new ConfigError(
      "url",
      "an azblob URL's path is the container, e.g. azblob://myaccount/locks (a blob prefix goes in ?prefix=)",
    );
  }
  const host = url.hosts[0] as { host: string; port?: number | undefined };
  const tls = url.searchParams.get("tls");
  if (tls !== null && tls !== "true" && tls !== "false") {
    throw new ConfigError("url", `the parameter "tls" must be true or false, got "${tls}"`);
  }
  let endpoint: string;
  let accountName: string;
  if (url.username === "") {
    if (host.port !== undefined) {
      throw new ConfigError(
        "url",
        "a host with a port is a path-style endpoint: name the account before it, azblob://<account>@host:port/<container>",
      );
    }
    accountName = host.host;
    endpoint = `${tls === "false" ? "http" : "https"}://${accountName}.blob.core.windows.net`;
  } else {
    accountName = url.username;
    const secure = tls === null ? !LOOPBACK.test(host.host) : tls === "true";
    const name = host.host.includes(":") ? `[${host.host}]` : host.host;
    const port = host.port === undefined ? "" : `:${host.port}`;
    endpoint = `${secure ? "https" : "http"}://${name}${port}/${accountName}`;
  }
  const key = url.searchParams.get("key") ?? (url.password === "" ? null : url.password);
  if (url.searchParams.has("key") && url.password !== "") {
    throw new ConfigError("url", "gives the account key twice (as the password and in ?key=)");
  }
  const sasToken = url.searchParams.get("sasToken");
  const prefix = url.searchParams.get("prefix");
  const create = url.searchParams.get("createContainer");
  if (create !== null && create !== "true" && create !== "false") {
    throw new ConfigError(
      "url",
      `the parameter "createContainer" must be true or false, got "${create}"`,
    );
  }
  return {
    endpoint,
    container,
    ...(sasToken === null ? { accountName } : { sasToken }),
    ...(key === null ? {} : { accountKey: key }),
    ...(prefix === null ? {} : { prefix }),
    ...(create === null ? {} : { createContainer: create === "true" }),
    ...numberParam(url.searchParams, "requestTimeoutMs"),
    ...numberParam(url.searchParams, "pollMaxMs"),
  };
}

function numberParam(params: URLSearchParams, name: "requestTimeoutMs" | "pollMaxMs") {
  const text = params.get(name);
  if (text === null) return {};
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value)) {
    throw new ConfigError(name, `must be a number of milliseconds, got "${text}"`);
  }
  return { [name]: value };
}
