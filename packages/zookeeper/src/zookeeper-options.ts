import { type BackendUrl, ConfigError, type HostPort, parseBackendUrl } from "@baton/core";
import type { ZookeeperClientLike } from "./zookeeper-client-like.js";
import { lockRoot } from "./zookeeper-keys.js";

/** What a {@link ClientFactory} is asked for. */
export interface ClientRequest {
  /** Ensemble members, in the order configured. */
  readonly hosts: readonly { readonly host: string; readonly port: number }[];
  /** The session timeout to ask the ensemble for (the TTL); the server may grant another. */
  readonly sessionTimeoutMs: number;
  /** The owner id of the session the client is for. */
  readonly ownerId: string;
}

/**
 * Builds the node-zookeeper-client of one session, NOT yet connected (the backend calls
 * `connect()`). Use it for client options, or to route a session through a proxy in tests.
 */
export type ClientFactory = (
  request: ClientRequest,
) => ZookeeperClientLike | Promise<ZookeeperClientLike>;

/** Options of {@link ZookeeperBackend}. */
export interface ZookeeperBackendOptions {
  /**
   * Ensemble members (`host:port`, port {@link DEFAULT_PORT} when omitted). Required unless
   * `client` is given.
   */
  readonly hosts?: readonly (string | HostPort)[];
  /** Path under which Baton keeps everything, e.g. `/apps/billing` (default: the root). */
  readonly chroot?: string;
  /**
   * Node under the chroot that holds one persistent parent per lock name (default
   * {@link DEFAULT_PREFIX}).
   */
  readonly prefix?: string;
  /** Builds each session's client (default: `createClient` with `spinDelay: 100`). */
  readonly createClient?: ClientFactory;
  /**
   * A user-supplied client, connected or not. A client has one ZooKeeper session, and every
   * Baton session of this backend (each coordinator's, one per lock TTL) then is that session:
   * every lock's TTL is its negotiated timeout whatever `ttlMs` asks for, and its expiry loses
   * every lock of every coordinator on the backend at once. Locks still exclude each other
   * (a lock is its node); closing a Baton session deletes its own nodes but leaves the client
   * open, and `close()` never closes it: the caller owns it. For client options or auth with
   * a ZooKeeper session per Baton session, pass `createClient` instead.
   */
  readonly client?: ZookeeperClientLike;
  /**
   * Bound on opening a session (connecting and negotiating), default
   * {@link DEFAULT_CONNECT_TIMEOUT_MS}: below core's own bound on opening a session (one TTL,
   * at least 5 s), so an ensemble that cannot be reached fails with this backend's error,
   * which names the members and the last connection error.
   */
  readonly connectTimeoutMs?: number;
}

/** ZooKeeper's client port, used for a member given without one. */
export const DEFAULT_PORT = 2181;

/** Default {@link ZookeeperBackendOptions.prefix}: lock parents live under `<chroot>/baton`. */
export const DEFAULT_PREFIX = "baton";

/** Default {@link ZookeeperBackendOptions.connectTimeoutMs}, in ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 4_000;

const MAX_CONNECT_TIMEOUT_MS = 600_000;
const NAME_PATTERN = /^[A-Za-z0-9._-]+$/;
const URL_PARAMS = new Set(["prefix", "connectTimeoutMs", "tls"]);

/** Options after validation. */
export interface ResolvedZookeeperOptions {
  /** Ensemble members (empty with a supplied client and no hosts). */
  readonly hosts: readonly { readonly host: string; readonly port: number }[];
  /** Path of the node holding the lock parents, e.g. `/baton`. */
  readonly root: string;
  /** The user's client factory, if any. */
  readonly createClient: ClientFactory | undefined;
  /** The user-supplied shared client, if any. */
  readonly client: ZookeeperClientLike | undefined;
  readonly connectTimeoutMs: number;
}

/** Checks every option (no I/O); throws `ConfigError` naming the field. */
export function resolveZookeeperOptions(
  options: ZookeeperBackendOptions,
): ResolvedZookeeperOptions {
  if (options === null || typeof options !== "object") {
    throw new ConfigError("options", "must be an object of ZooKeeper backend options");
  }
  const client = options.client;
  if (client !== undefined && typeof client.getSessionTimeout !== "function") {
    throw new ConfigError("client", "must be a node-zookeeper-client Client");
  }
  const hosts = checkHosts(options.hosts, client !== undefined);
  const chroot = checkPath(options.chroot ?? "", "chroot");
  const prefix = checkPrefix(options.prefix ?? DEFAULT_PREFIX);
  if (options.createClient !== undefined && typeof options.createClient !== "function") {
    throw new ConfigError(
      "createClient",
      "must be a function returning a node-zookeeper-client Client",
    );
  }
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (
    !Number.isInteger(connectTimeoutMs) ||
    connectTimeoutMs < 1 ||
    connectTimeoutMs > MAX_CONNECT_TIMEOUT_MS
  ) {
    throw new ConfigError(
      "connectTimeoutMs",
      `must be an integer from 1 to ${MAX_CONNECT_TIMEOUT_MS}, got ${String(connectTimeoutMs)}`,
    );
  }
  return {
    hosts,
    root: lockRoot(chroot, prefix),
    createClient: options.createClient,
    client,
    connectTimeoutMs,
  };
}

/**
 * Options from a URL: `zookeeper://h1:2181,h2:2181/chroot?prefix=baton&connectTimeoutMs=10000`.
 * No I/O; throws `ConfigError` for anything it does not understand or accept (field `url`,
 * or the option's name for a bad `prefix` or `connectTimeoutMs`). There is no TLS:
 * node-zookeeper-client connects over plain TCP only, so `?tls=true` is refused.
 */
export function zookeeperOptionsFromUrl(url: string | BackendUrl): ZookeeperBackendOptions {
  const parsed = typeof url === "string" ? parseBackendUrl(url) : url;
  if (parsed.scheme !== "zookeeper") {
    throw new ConfigError("url", `expected a zookeeper:// URL, got "${parsed.scheme}:"`);
  }
  if (parsed.hosts.length === 0) {
    throw new ConfigError(
      "url",
      "zookeeper:// needs at least one host, e.g. zookeeper://127.0.0.1:2181",
    );
  }
  if (parsed.username !== "" || parsed.password !== "") {
    throw new ConfigError(
      "url",
      "zookeeper:// does not take credentials; pass an authenticated client with the `client` or `createClient` option",
    );
  }
  for (const key of parsed.searchParams.keys()) {
    if (!URL_PARAMS.has(key)) {
      throw new ConfigError(
        "url",
        `unknown zookeeper:// parameter "${key}" (known: ${[...URL_PARAMS].join(", ")})`,
      );
    }
  }
  const tls = parsed.searchParams.get("tls");
  if (tls !== null && tls !== "false" && tls !== "0") {
    throw new ConfigError(
      "url",
      "zookeeper:// cannot use TLS: node-zookeeper-client, the client this backend uses, connects over plain TCP only; reach a TLS-only ensemble through a local TLS tunnel (for example stunnel) and name the tunnel's address",
    );
  }
  let chroot: string;
  try {
    chroot = checkPath(parsed.pathname, "chroot");
  } catch (error) {
    throw new ConfigError("url", (error as Error).message);
  }
  const timeoutText = parsed.searchParams.get("connectTimeoutMs");
  const prefix = parsed.searchParams.get("prefix");
  const options: ZookeeperBackendOptions = {
    hosts: parsed.hosts.map((h) => ({ host: h.host, port: h.port ?? DEFAULT_PORT })),
    chroot,
    ...(prefix === null ? {} : { prefix }),
    ...(timeoutText === null ? {} : { connectTimeoutMs: Number(timeoutText) }),
  };
  resolveZookeeperOptions(options);
  return options;
}

/**
 * Checks a `zookeeper://` URL's options (hosts, chroot, `prefix`, `connectTimeoutMs`) without
 * any I/O; throws `ConfigError` naming what is wrong (see {@link zookeeperOptionsFromUrl}).
 */
export function checkZookeeperUrl(url: BackendUrl): void {
  zookeeperOptionsFromUrl(url);
}

function checkPrefix(prefix: unknown): string {
  if (
    typeof prefix !== "string" ||
    !NAME_PATTERN.test(prefix) ||
    prefix === "." ||
    prefix === ".."
  ) {
    throw new ConfigError(
      "prefix",
      `must be one node name of letters, digits, ".", "_" or "-", got ${JSON.stringify(prefix)}`,
    );
  }
  return prefix;
}

function checkHosts(
  hosts: ZookeeperBackendOptions["hosts"],
  optional: boolean,
): { host: string; port: number }[] {
  if (hosts === undefined) {
    if (optional) return [];
    throw new ConfigError("hosts", "give the ensemble members (host:port, ...) or a client");
  }
  if (!Array.isArray(hosts) || hosts.length === 0) {
    throw new ConfigError(
      "hosts",
      "must be a non-empty list of host:port strings or { host, port }",
    );
  }
  return hosts.map((entry: string | HostPort) => {
    if (typeof entry === "string") {
      const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/,]+))(?::(\d+))?$/.exec(entry);
      if (m === null)
        throw new ConfigError("hosts", `bad member "${entry}" (expected host or host:port)`);
      return {
        host: (m[1] ?? m[2]) as string,
        port: checkPort(m[3] === undefined ? DEFAULT_PORT : Number(m[3])),
      };
    }
    if (
      entry === null ||
      typeof entry !== "object" ||
      typeof entry.host !== "string" ||
      entry.host === ""
    ) {
      throw new ConfigError("hosts", "each member must be a host:port string or { host, port }");
    }
    return { host: entry.host, port: checkPort(entry.port ?? DEFAULT_PORT) };
  });
}

function checkPort(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new ConfigError("hosts", `bad port ${String(port)} (1 to 65535)`);
  }
  return port;
}

function checkPath(path: string, field: string): string {
  if (typeof path !== "string")
    throw new ConfigError(field, "must be a string path such as /apps/billing");
  const trimmed = path.replace(/\/+$/, "");
  if (trimmed === "") return "";
  if (!trimmed.startsWith("/")) throw new ConfigError(field, `must start with "/", got "${path}"`);
  for (const part of trimmed.slice(1).split("/")) {
    if (part === "" || part === "." || part === ".." || hasControlCharacter(part)) {
      throw new ConfigError(field, `"${path}" is not a valid ZooKeeper path`);
    }
  }
  return trimmed;
}

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
  }
  return false;
}
