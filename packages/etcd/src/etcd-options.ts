import { type BackendUrl, ConfigError } from "@baton/core";
import { Etcd3 } from "etcd3";

/** Options of {@link EtcdBackend}. Exactly one of `hosts` and `client`. */
export interface EtcdBackendOptions {
  /** Client endpoints, `host:port` (or `http://host:port`), e.g. every member of the cluster. */
  readonly hosts?: readonly string[];
  /** A client you built yourself (TLS, auth, gRPC options). The backend does not close it. */
  readonly client?: Etcd3;
  /** User name for etcd authentication (with `hosts`). */
  readonly username?: string;
  /** Password for etcd authentication (with `hosts`). */
  readonly password?: string;
  /**
   * Prepended to every lock key: a lock `name` lives under `<prefix><name>/`. Default `""`,
   * which is the layout `etcdctl lock <name>` uses, so the two exclude each other.
   */
  readonly prefix?: string;
  /** Bound on each etcd call, in ms (default 5000, like etcdctl's `--command-timeout`). */
  readonly requestTimeoutMs?: number;
}

/** Options after validation. */
export interface ResolvedEtcdOptions {
  readonly client: Etcd3;
  readonly ownsClient: boolean;
  readonly prefix: string;
  readonly requestTimeoutMs: number;
}

/** Default bound on each etcd call. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
const OPTION_KEYS = ["hosts", "client", "username", "password", "prefix", "requestTimeoutMs"];
const URL_PARAMS = ["prefix", "requestTimeoutMs"];

/** Checks options and builds the client; throws `ConfigError` naming the field, before any I/O. */
export function resolveEtcdOptions(options: EtcdBackendOptions): ResolvedEtcdOptions {
  if (options === null || typeof options !== "object") {
    throw new ConfigError("options", "pass { hosts } or { client }");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) {
      throw new ConfigError(
        `options.${key}`,
        `is not an etcd backend option (${OPTION_KEYS.join(", ")})`,
      );
    }
  }
  const prefix = options.prefix ?? "";
  if (typeof prefix !== "string") throw new ConfigError("prefix", "must be a string");
  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!Number.isInteger(requestTimeoutMs) || requestTimeoutMs < 100 || requestTimeoutMs > 600_000) {
    throw new ConfigError(
      "requestTimeoutMs",
      `must be an integer between 100 and 600000 (milliseconds), got ${String(requestTimeoutMs)}`,
    );
  }
  if ((options.client === undefined) === (options.hosts === undefined)) {
    throw new ConfigError(
      "hosts",
      "pass exactly one of `hosts` (endpoints) and `client` (an Etcd3 client)",
    );
  }
  if (options.client !== undefined) {
    if (!isEtcd3Client(options.client))
      throw new ConfigError("client", "must be an Etcd3 client from the etcd3 package");
    if (options.username !== undefined || options.password !== undefined) {
      throw new ConfigError("username", "set credentials on the Etcd3 client you pass, not here");
    }
    return { client: options.client, ownsClient: false, prefix, requestTimeoutMs };
  }
  const hosts = options.hosts;
  if (
    !Array.isArray(hosts) ||
    hosts.length === 0 ||
    hosts.some((h) => typeof h !== "string" || h === "")
  ) {
    throw new ConfigError("hosts", "must be a non-empty list of host:port strings");
  }
  if ((options.username === undefined) !== (options.password === undefined)) {
    throw new ConfigError("password", "give both username and password, or neither");
  }
  const client = new Etcd3({
    hosts: [...hosts],
    dialTimeout: requestTimeoutMs,
    ...(options.username === undefined
      ? {}
      : { auth: { username: options.username, password: options.password as string } }),
  });
  return { client, ownsClient: true, prefix, requestTimeoutMs };
}

/**
 * Options from `etcd://h1:2379,h2:2379[?prefix=locks/&requestTimeoutMs=5000]`, with optional
 * `user:password@` for etcd authentication. The port defaults to 2379.
 */
export function etcdOptionsFromUrl(url: BackendUrl): EtcdBackendOptions {
  if (url.hosts.length === 0) {
    throw new ConfigError("url", "an etcd URL needs at least one host, e.g. etcd://127.0.0.1:2379");
  }
  if (url.pathname !== "" && url.pathname !== "/") {
    throw new ConfigError(
      "url",
      `an etcd URL has no path; put a key prefix in ?prefix=, got path "${url.pathname}"`,
    );
  }
  for (const name of url.searchParams.keys()) {
    if (!URL_PARAMS.includes(name)) {
      throw new ConfigError(
        "url",
        `unknown etcd URL parameter "${name}" (use ${URL_PARAMS.join(", ")})`,
      );
    }
  }
  const hosts = url.hosts.map((h) => {
    const host = h.host.includes(":") ? `[${h.host}]` : h.host;
    return `${host}:${h.port ?? 2379}`;
  });
  const timeoutText = url.searchParams.get("requestTimeoutMs");
  const requestTimeoutMs = timeoutText === null ? undefined : Number(timeoutText);
  if (timeoutText !== null && (timeoutText.trim() === "" || !Number.isFinite(requestTimeoutMs))) {
    throw new ConfigError(
      "requestTimeoutMs",
      `must be a number of milliseconds, got "${timeoutText}"`,
    );
  }
  const prefix = url.searchParams.get("prefix");
  return {
    hosts,
    ...(url.username === "" ? {} : { username: url.username, password: url.password }),
    ...(prefix === null ? {} : { prefix }),
    ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
  };
}

/**
 * Whether `value` looks like an etcd3 `Etcd3` client. Checked by shape, not `instanceof`, so a
 * client from the app's own copy of etcd3 is accepted.
 */
function isEtcd3Client(value: unknown): value is Etcd3 {
  const client = value as Partial<Record<keyof Etcd3, unknown>> | null;
  return (
    typeof client === "object" &&
    client !== null &&
    typeof client.lease === "function" &&
    typeof client.if === "function" &&
    typeof client.watch === "function" &&
    typeof client.close === "function"
  );
}
