import {
  type BackendSession,
  BackendUnavailableError,
  type BackendUrl,
  ConfigError,
  type Guarantees,
  type HostPort,
  type LockBackend,
  type OpenSessionOptions,
  parseBackendUrl,
} from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { closeClient, ZookeeperSession } from "./zookeeper-session.js";

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
export type ClientFactory = (request: ClientRequest) => Client | Promise<Client>;

/** Options of {@link ZookeeperBackend}. */
export interface ZookeeperBackendOptions {
  /** Ensemble members (`host:port`, port 2181 when omitted). Required unless `client` is given. */
  readonly hosts?: readonly (string | HostPort)[];
  /** Path under which Baton keeps everything, e.g. `/apps/billing` (default: the root). */
  readonly chroot?: string;
  /** Node under the chroot that holds one persistent parent per lock name (default `baton`). */
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
  readonly client?: Client;
  /**
   * Bound on opening a session (connecting and negotiating), default 4000 ms: below core's
   * own bound on opening a session (one TTL, at least 5 s), so an ensemble that cannot be
   * reached fails with this backend's error, which names the members and the last
   * connection error.
   */
  readonly connectTimeoutMs?: number;
}

export const ZOOKEEPER_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: true,
  consensus: true,
  crossProcess: true,
};

const DEFAULT_PORT = 2181;
const DEFAULT_CONNECT_TIMEOUT_MS = 4_000;
const NAME_PATTERN = /^[A-Za-z0-9._-]+$/;

/**
 * ZooKeeper backend (`zookeeper://h1:2181,h2:2181/chroot`): one ZooKeeper session per Baton
 * session; a lock is an EPHEMERAL_SEQUENTIAL child of a persistent parent, the lowest holds it,
 * its czxid is the fencing token, and waiters watch only the node just ahead of theirs.
 */
export class ZookeeperBackend implements LockBackend {
  readonly kind = "zookeeper";
  readonly guarantees = ZOOKEEPER_GUARANTEES;
  /** Path of the node holding the lock parents, e.g. `/baton`. */
  readonly root: string;
  readonly #hosts: readonly { host: string; port: number }[];
  readonly #factory: ClientFactory;
  readonly #shared: Client | undefined;
  readonly #connectTimeoutMs: number;
  readonly #sessions = new Set<ZookeeperSession>();
  #sharedReady: Promise<void> | undefined;
  #closed = false;

  constructor(options: ZookeeperBackendOptions) {
    if (options === null || typeof options !== "object") {
      throw new ConfigError("options", "must be an object of ZooKeeper backend options");
    }
    this.#shared = options.client;
    if (this.#shared !== undefined && typeof this.#shared.getSessionTimeout !== "function") {
      throw new ConfigError("client", "must be a node-zookeeper-client Client");
    }
    this.#hosts = checkHosts(options.hosts, this.#shared !== undefined);
    const chroot = checkPath(options.chroot ?? "", "chroot");
    const prefix = options.prefix ?? "baton";
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
    this.root = `${chroot}/${prefix}`;
    if (options.createClient !== undefined && typeof options.createClient !== "function") {
      throw new ConfigError(
        "createClient",
        "must be a function returning a node-zookeeper-client Client",
      );
    }
    this.#factory = options.createClient ?? defaultFactory;
    const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    if (!Number.isInteger(connectTimeoutMs) || connectTimeoutMs < 1 || connectTimeoutMs > 600_000) {
      throw new ConfigError(
        "connectTimeoutMs",
        `must be an integer from 1 to 600000, got ${String(connectTimeoutMs)}`,
      );
    }
    this.#connectTimeoutMs = connectTimeoutMs;
  }

  /** Builds a backend from a `zookeeper://` URL (see {@link zookeeperOptionsFromUrl}). */
  static fromUrl(
    url: string | BackendUrl,
    extra: Omit<ZookeeperBackendOptions, "hosts" | "chroot"> = {},
  ): ZookeeperBackend {
    return new ZookeeperBackend({ ...zookeeperOptionsFromUrl(url), ...extra });
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this zookeeper backend is closed");
    options.signal?.throwIfAborted();
    if (this.#shared !== undefined) return await this.#openShared(options);
    const client = await this.#factory({
      hosts: this.#hosts,
      sessionTimeoutMs: options.ttlMs,
      ownerId: options.ownerId,
    });
    try {
      await connect(client, this.#connectTimeoutMs, options.signal, this.#members());
    } catch (error) {
      void closeClient(client, 0);
      throw error;
    }
    if (this.#closed) {
      await closeClient(client, 1_000);
      throw new BackendUnavailableError("this zookeeper backend is closed");
    }
    return this.#track(client, options.ownerId, true);
  }

  async #openShared(options: OpenSessionOptions): Promise<BackendSession> {
    const client = this.#shared as Client;
    const managerState = (client as unknown as { connectionManager?: { state?: number } })
      .connectionManager?.state;
    // The connection manager's CLOSING, CLOSED, SESSION_EXPIRED, AUTHENTICATION_FAILED are < 0.
    if (typeof managerState === "number" && managerState < 0) {
      throw new BackendUnavailableError(
        "zookeeper: the supplied client is closed or its session expired; give Baton a new client",
      );
    }
    if (client.getState() !== zookeeper.State.SYNC_CONNECTED) {
      this.#sharedReady ??= connect(
        client,
        this.#connectTimeoutMs,
        undefined,
        "the supplied client's ensemble",
        true,
      ).finally(() => {
        this.#sharedReady = undefined;
      });
      await raceAbort(this.#sharedReady, options.signal);
    }
    return this.#track(client, options.ownerId, false);
  }

  /** The ensemble members for messages, e.g. `zk1:2181, zk2:2181` (no credentials in them). */
  #members(): string {
    return this.#hosts.map((h) => formatHost(h)).join(", ");
  }

  #track(client: Client, ownerId: string, ownsClient: boolean): ZookeeperSession {
    const session = new ZookeeperSession(client, {
      root: this.root,
      ownerId,
      ownsClient,
      onEnd: (s) => this.#sessions.delete(s),
    });
    this.#sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#sessions].map((s) => s.close()));
  }
}

function formatHost(h: { host: string; port: number }): string {
  return `${h.host.includes(":") ? `[${h.host}]` : h.host}:${h.port}`;
}

function defaultFactory(request: ClientRequest): Client {
  const hosts = request.hosts.map(formatHost);
  return zookeeper.createClient(hosts.join(","), {
    sessionTimeout: request.sessionTimeoutMs,
    spinDelay: 100,
    retries: 0,
  });
}

/**
 * Connects `client` (calling `connect()` unless `alreadyStarted` is plausible) and resolves once
 * a session is established; rejects with `BackendUnavailableError` after `timeoutMs` (naming
 * `members` and the last connection error), or the signal's reason.
 */
function connect(
  client: Client,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  members: string,
  mayBeStarted = false,
): Promise<void> {
  const started = performance.now();
  const lastError = watchSocketErrors(client);
  return new Promise<void>((resolve, reject) => {
    const cleanup = () => {
      lastError.stop();
      clearTimeout(timer);
      client.removeListener("connected", onConnected);
      client.removeListener("expired", onExpired);
      client.removeListener("authenticationFailed", onAuth);
      signal?.removeEventListener("abort", onAbort);
    };
    const onConnected = () => {
      cleanup();
      resolve();
    };
    const fail = (error: unknown) => {
      cleanup();
      reject(error);
    };
    const onExpired = () =>
      fail(
        new BackendUnavailableError(
          `zookeeper: the new session with ${members} expired before it was established; check the ensemble's health (zkServer.sh status) and retry`,
        ),
      );
    const onAuth = () =>
      fail(
        new BackendUnavailableError(
          `zookeeper: ${members} refused the client's credentials; check the digest or SASL settings of the client you pass`,
        ),
      );
    const onAbort = () => fail(signal?.reason);
    const timer = setTimeout(() => {
      const cause = lastError.error;
      const detail = cause === undefined ? "no answer" : `last error: ${cause.message}`;
      fail(
        new BackendUnavailableError(
          `zookeeper: no ensemble member of ${members} accepted a session within ${Math.round(performance.now() - started)} ms (${detail}); check that ZooKeeper runs there and is reachable from here`,
          cause === undefined ? undefined : { cause },
        ),
      );
    }, timeoutMs);
    client.on("connected", onConnected);
    client.on("expired", onExpired);
    client.on("authenticationFailed", onAuth);
    signal?.addEventListener("abort", onAbort, { once: true });
    const state = (client as unknown as { connectionManager?: { state?: number } })
      .connectionManager?.state;
    // 0 is the connection manager's DISCONNECTED before the first connect().
    if (!mayBeStarted || state === 0 || state === undefined) client.connect();
  });
}

/**
 * Remembers the last socket error of `client`'s connection attempts (the client itself only
 * retries and keeps no record), so a connect that times out can say why. Reads the client's
 * connection manager, which binds its `onSocketError` anew on every attempt; without one (a
 * client of another shape) it records nothing.
 */
function watchSocketErrors(client: Client): { readonly error: Error | undefined; stop(): void } {
  const manager = (client as unknown as { connectionManager?: Record<string, unknown> })
    .connectionManager;
  const original = manager?.onSocketError;
  const record: { error: Error | undefined; stop(): void } = {
    error: undefined,
    stop: () => undefined,
  };
  if (manager === undefined || typeof original !== "function") return record;
  const own = Object.hasOwn(manager, "onSocketError");
  manager.onSocketError = function (this: unknown, error: unknown) {
    if (error instanceof Error) record.error = error;
    return (original as (e: unknown) => unknown).call(this, error);
  };
  record.stop = () => {
    if (own) manager.onSocketError = original;
    else delete manager.onSocketError;
  };
  return record;
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
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

const URL_PARAMS = new Set(["prefix", "connectTimeoutMs", "tls"]);

/**
 * Options from a URL: `zookeeper://h1:2181,h2:2181/chroot?prefix=baton&connectTimeoutMs=10000`.
 * Throws `ConfigError` (field `url`) for anything it does not understand. There is no TLS:
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
  return {
    hosts: parsed.hosts.map((h) => ({ host: h.host, port: h.port ?? DEFAULT_PORT })),
    chroot,
    ...(prefix === null ? {} : { prefix }),
    ...(timeoutText === null ? {} : { connectTimeoutMs: Number(timeoutText) }),
  };
}

/**
 * Checks a `zookeeper://` URL's options (hosts, chroot, `prefix`, `connectTimeoutMs`) without
 * any I/O; throws `ConfigError` naming what is wrong. Registered as the scheme's URL check, so
 * `createCoordinator({ url })` refuses a bad option at construction.
 */
export function checkZookeeperUrl(url: BackendUrl): void {
  // The constructor checks every option and does no I/O (sessions connect when opened).
  void new ZookeeperBackend(zookeeperOptionsFromUrl(url));
}

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
  }
  return false;
}
