import { readFileSync } from "node:fs";
import { type BackendUrl, ConfigError } from "@baton/core";
import { Etcd3, type IOptions } from "etcd3";
import type { EtcdClient } from "./etcd-client.js";

/** Options of {@link EtcdBackend}. Exactly one of `hosts` and `client`. */
export interface EtcdBackendOptions {
  /** Client endpoints, `host:port` (or `http://host:port`), e.g. every member of the cluster. */
  readonly hosts?: readonly string[];
  /**
   * An `Etcd3` client (from the `etcd3` package) you built yourself (TLS, auth, gRPC options).
   * The backend does not close it. See {@link EtcdClient} for the members Baton uses.
   */
  readonly client?: EtcdClient;
  /** User name for etcd authentication (with `hosts`). */
  readonly username?: string;
  /** Password for etcd authentication (with `hosts`). */
  readonly password?: string;
  /**
   * Prepended to every lock key: a lock `name` lives under `<prefix><name>/`. Default
   * {@link DEFAULT_PREFIX} (`""`), which is the layout `etcdctl lock <name>` uses, so the two
   * exclude each other.
   */
  readonly prefix?: string;
  /**
   * Bound on each etcd call, in ms (default {@link DEFAULT_REQUEST_TIMEOUT_MS}, 5000, like
   * etcdctl's `--command-timeout`).
   */
  readonly requestTimeoutMs?: number;
  /**
   * Connect over TLS (with `hosts`). `true` checks the server certificate against Node's
   * trusted CAs; `ca` replaces them, and `cert` with `key` is a client certificate (etcd's
   * `--client-cert-auth`), all PEM. Hosts written `https://host:port` use TLS too.
   */
  readonly tls?: boolean | EtcdTlsOptions;
}

/** PEM files' contents for {@link EtcdBackendOptions.tls}. */
export interface EtcdTlsOptions {
  /** CA certificates that sign the server's certificate (instead of Node's trusted CAs). */
  readonly ca?: Buffer;
  /** Client certificate chain; give `key` with it. */
  readonly cert?: Buffer;
  /** Client private key; give `cert` with it. */
  readonly key?: Buffer;
}

/** Options after validation. */
export interface ResolvedEtcdOptions {
  readonly client: EtcdClient;
  readonly ownsClient: boolean;
  readonly prefix: string;
  readonly requestTimeoutMs: number;
  /**
   * The members `hosts` names, `host:port` separated by `", "`, for messages; undefined for a
   * given `client`.
   */
  readonly endpoint: string | undefined;
}

/** Default bound on each etcd call, in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
/** Default key prefix: none, the layout of `etcdctl lock <name>`. */
export const DEFAULT_PREFIX = "";
/** Port of a host given without one, in options from a URL: etcd's client port. */
export const DEFAULT_PORT = 2379;
const OPTION_KEYS = [
  "hosts",
  "client",
  "username",
  "password",
  "prefix",
  "requestTimeoutMs",
  "tls",
];
const URL_PARAMS = ["prefix", "requestTimeoutMs", "tls", "ca", "cert", "key"];

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
  const prefix = options.prefix ?? DEFAULT_PREFIX;
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
    if (!isEtcdClient(options.client))
      throw new ConfigError("client", "must be an Etcd3 client from the etcd3 package");
    if (options.username !== undefined || options.password !== undefined) {
      throw new ConfigError("username", "set credentials on the Etcd3 client you pass, not here");
    }
    if (options.tls !== undefined) {
      throw new ConfigError("tls", "set TLS credentials on the Etcd3 client you pass, not here");
    }
    return {
      client: options.client,
      ownsClient: false,
      prefix,
      requestTimeoutMs,
      endpoint: undefined,
    };
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
  const tls = checkTls(options.tls);
  const client = new Etcd3({
    hosts: tls === undefined ? [...hosts] : hosts.map((h) => withTls(h)),
    ...(tls?.credentials === undefined ? {} : { credentials: tls.credentials }),
    dialTimeout: requestTimeoutMs,
    ...(options.username === undefined
      ? {}
      : {
          auth: {
            username: options.username,
            password: options.password as string,
            // etcd3 exchanges the password for a token before the first call, without a
            // deadline of its own: a member that never answers would hang every call.
            callOptions: () => ({ deadline: Date.now() + requestTimeoutMs }),
          },
        }),
  });
  return { client, ownsClient: true, prefix, requestTimeoutMs, endpoint: membersOf(hosts) };
}

/**
 * `hosts` as `host:port, host:port`: without `http://` or `https://`, nor any user info or
 * path a host was written with.
 */
function membersOf(hosts: readonly string[]): string {
  return hosts
    .map((h) => {
      const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(h);
      let rest = scheme === null ? h : h.slice(scheme[0].length);
      const slash = rest.search(/[/?#]/);
      if (slash >= 0) rest = rest.slice(0, slash);
      const at = rest.lastIndexOf("@");
      return at >= 0 ? rest.slice(at + 1) : rest;
    })
    .join(", ");
}

/** What `tls` asks for: TLS, and the credentials when it names files. */
function checkTls(
  tls: EtcdBackendOptions["tls"],
): { credentials: IOptions["credentials"] | undefined } | undefined {
  if (tls === undefined || tls === false) return undefined;
  if (tls === true) return { credentials: undefined };
  if (tls === null || typeof tls !== "object" || Array.isArray(tls)) {
    throw new ConfigError("tls", "must be true, false or { ca, cert, key } (PEM Buffers)");
  }
  for (const key of Object.keys(tls)) {
    if (key !== "ca" && key !== "cert" && key !== "key") {
      throw new ConfigError(`tls.${key}`, "unknown TLS option; allowed: ca, cert, key");
    }
    if (!Buffer.isBuffer(tls[key])) {
      throw new ConfigError(`tls.${key}`, "must be a Buffer of PEM text");
    }
  }
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new ConfigError("tls.key", "give a client certificate's cert and key together");
  }
  if (tls.ca === undefined && tls.cert === undefined) return { credentials: undefined };
  // gRPC takes null for "Node's trusted CAs"; etcd3's type insists on a Buffer.
  return {
    credentials: {
      rootCertificate: tls.ca ?? (null as unknown as Buffer),
      ...(tls.key === undefined ? {} : { privateKey: tls.key }),
      ...(tls.cert === undefined ? {} : { certChain: tls.cert }),
    },
  };
}

/** `host:port` as etcd3 connects to it over TLS (`https://host:port`). */
function withTls(host: string): string {
  if (host.startsWith("http://")) {
    throw new ConfigError("hosts", `"${host}" is plain http, but tls is on; drop "http://"`);
  }
  return host.startsWith("https://") ? host : `https://${host}`;
}

/**
 * Options from `etcd://h1:2379,h2:2379[?prefix=locks/&requestTimeoutMs=5000]`, with optional
 * `user:password@` for etcd authentication. The port defaults to 2379. TLS: `?tls=true`
 * (the server checked against Node's trusted CAs), and `ca=`, `cert=`, `key=` name PEM files
 * (read when the backend is created; any of them turns TLS on).
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
    return `${host}:${h.port ?? DEFAULT_PORT}`;
  });
  const timeoutText = url.searchParams.get("requestTimeoutMs");
  const requestTimeoutMs = timeoutText === null ? undefined : Number(timeoutText);
  if (timeoutText !== null && (timeoutText.trim() === "" || !Number.isFinite(requestTimeoutMs))) {
    throw new ConfigError(
      "requestTimeoutMs",
      `must be a number of milliseconds, got "${timeoutText}"`,
    );
  }
  if ((url.username === "") !== (url.password === "")) {
    throw new ConfigError(
      "url",
      "etcd authentication needs both a user name and a password (etcd://user:password@host)",
    );
  }
  const prefix = url.searchParams.get("prefix");
  const tls = tlsFromUrl(url.searchParams);
  return {
    hosts,
    ...(url.username === "" ? {} : { username: url.username, password: url.password }),
    ...(tls === undefined ? {} : { tls }),
    ...(prefix === null ? {} : { prefix }),
    ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
  };
}

/** `tls` from `?tls=true|false` and the PEM files `?ca=`, `?cert=`, `?key=`. */
function tlsFromUrl(params: URLSearchParams): EtcdBackendOptions["tls"] {
  const flag = params.get("tls");
  if (flag !== null && !["true", "false", "1", "0"].includes(flag)) {
    throw new ConfigError("url", `the parameter "tls" must be true or false, got "${flag}"`);
  }
  const files: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  for (const name of ["ca", "cert", "key"] as const) {
    const path = params.get(name);
    if (path === null) continue;
    try {
      files[name] = readFileSync(path);
    } catch (cause) {
      throw new ConfigError(
        "url",
        `the parameter "${name}" names a file that cannot be read: ${(cause as Error).message}`,
      );
    }
  }
  const named = Object.keys(files).length > 0;
  if (flag === "false" || flag === "0") {
    if (named) throw new ConfigError("url", 'gives "tls=false" and TLS files (ca, cert, key)');
    return undefined;
  }
  if (named) return files;
  return flag === null ? undefined : true;
}

/**
 * Whether `value` has the members of an {@link EtcdClient} (an etcd3 `Etcd3` client). Checked
 * by shape, not `instanceof`, so a client from the app's own copy of etcd3 is accepted.
 */
function isEtcdClient(value: unknown): value is EtcdClient {
  if (typeof value !== "object" || value === null) return false;
  const client = value as Record<string, Record<string, unknown> | undefined>;
  const has = (service: string, methods: readonly string[]) => {
    const object = client[service];
    return (
      typeof object === "object" &&
      object !== null &&
      methods.every((m) => typeof object[m] === "function")
    );
  };
  return (
    typeof (value as { close?: unknown }).close === "function" &&
    has("kv", ["txn", "range"]) &&
    has("leaseClient", ["leaseGrant", "leaseRevoke", "leaseTimeToLive", "leaseKeepAlive"]) &&
    has("watchClient", ["watch"])
  );
}
