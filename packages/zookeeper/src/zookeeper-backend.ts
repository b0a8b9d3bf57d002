import {
  type BackendSession,
  BackendUnavailableError,
  type BackendUrl,
  boundedCall,
  type Guarantees,
  type LockBackend,
  linkSignals,
  type OpenSessionOptions,
} from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { closeClient, coalesceWrites, connect, isClosedForGood } from "./client-connection.js";
import {
  type ClientFactory,
  type ClientRequest,
  resolveZookeeperOptions,
  type ZookeeperBackendOptions,
  zookeeperOptionsFromUrl,
} from "./zookeeper-options.js";
import { ZookeeperSession } from "./zookeeper-session.js";

/**
 * What the ZooKeeper backend guarantees: monotonic tokens (each lock node's czxid), waiters
 * granted in queue order, grants agreed by the ensemble (ZAB), exclusion across processes,
 * records, semaphores and read-write locks (see zookeeper-permits.ts), inspection and the
 * forced release of one grant (see zookeeper-inspection.ts).
 */
export const ZOOKEEPER_GUARANTEES: Guarantees = {
  fencing: "monotonic",
  fifo: true,
  consensus: true,
  crossProcess: true,
  records: true,
  semaphores: true,
  inspection: true,
  forceRelease: "grant",
};

/** How long a session opened after `close()` began waits for its client to close. */
const CLOSE_LATE_CLIENT_MS = 1_000;

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
  /**
   * The ensemble members this backend connects to, e.g. `zk1:2181, zk2:2181`, named in error
   * messages (never credentials); undefined for a given `client` without `hosts`.
   */
  readonly endpoint: string | undefined;
  readonly #hosts: readonly { host: string; port: number }[];
  readonly #factory: ClientFactory;
  readonly #shared: Client | undefined;
  readonly #connectTimeoutMs: number;
  readonly #sessions = new Set<ZookeeperSession>();
  /** Aborted by `close()`: a session still opening stops waiting for its connection. */
  readonly #closing = new AbortController();
  #sharedReady: Promise<void> | undefined;
  #closed = false;

  constructor(options: ZookeeperBackendOptions) {
    const resolved = resolveZookeeperOptions(options);
    this.#shared = resolved.client as Client | undefined;
    this.#hosts = resolved.hosts;
    this.endpoint = this.#hosts.length === 0 ? undefined : this.#members();
    this.root = resolved.root;
    this.#factory = resolved.createClient ?? defaultFactory;
    this.#connectTimeoutMs = resolved.connectTimeoutMs;
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
    // ZookeeperClientLike describes node-zookeeper-client's Client by shape.
    const client = (await this.#factory({
      hosts: this.#hosts,
      sessionTimeoutMs: options.ttlMs,
      ownerId: options.ownerId,
    })) as Client;
    // Hot path: see docs/hot-path.md, "ZooKeeper".
    coalesceWrites(client);
    const link = linkSignals([options.signal, this.#closing.signal]);
    try {
      await connect(client, this.#connectTimeoutMs, link.signal, this.#members());
    } catch (error) {
      void closeClient(client, 0);
      throw error;
    } finally {
      link.dispose();
    }
    if (this.#closed) {
      await closeClient(client, CLOSE_LATE_CLIENT_MS);
      throw new BackendUnavailableError("this zookeeper backend is closed");
    }
    return this.#track(client, options.ownerId, true);
  }

  async #openShared(options: OpenSessionOptions): Promise<BackendSession> {
    const client = this.#shared as Client;
    if (isClosedForGood(client)) {
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
      // One connect shared by every opener; each stops waiting when its own signal aborts.
      const link = linkSignals([options.signal, this.#closing.signal]);
      try {
        await boundedCall(this.#sharedReady, { signal: link.signal });
      } finally {
        link.dispose();
      }
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
      ensemble: this.endpoint,
      ownerId,
      ownsClient,
      onClose: (s) => this.#sessions.delete(s),
    });
    this.#sessions.add(session);
    return session;
  }

  /**
   * Closes every session (each waits at most a moment for the ensemble's confirmation) and
   * stops the opens still under way; bounded whatever the ensemble does. A client given as
   * `client` is left open.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#closing.abort(new BackendUnavailableError("this zookeeper backend is closed"));
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
