import type {
  BackendSession,
  BackendUrl,
  Guarantees,
  LockBackend,
  OpenSessionOptions,
} from "@baton/core";
import {
  AuthenticationError,
  BackendUnavailableError,
  ConfigError,
  parseBackendUrl,
} from "@baton/core";
import { Redis } from "ioredis";
import { clientAddress } from "./client-address.js";
import { asRedisClient, isNodeRedis, NodeRedisClient } from "./node-redis-client.js";
import { ownedClientOptions } from "./redis-client.js";
import type { NodeRedisClientLike, RedisClientLike } from "./redis-client-like.js";
import {
  defaultNodeTimeoutMs,
  type RedlockBackendOptions,
  resolveRedlockOptions,
} from "./redlock-options.js";
import { RedlockSession } from "./redlock-session.js";
import { whenReady } from "./when-ready.js";

/**
 * What the `redlock://` backend guarantees (its `guarantees` field).
 *
 * No semaphores or read-write locks: a permit key needs one store that keeps its queue of
 * holders and waiters and its tokens, and grants by that queue in one atomic step. Redlock's
 * nodes are independent, each with its own copy that a quorum may disagree on, so no node's
 * queue or counter is the semaphore's; `coordinator.semaphore()` and
 * `coordinator.readWriteLock()` refuse the backend with a `ConfigError`.
 */
export const REDLOCK_GUARANTEES: Guarantees = {
  // The Redlock algorithm hands out no ordered token: core's locks then have none to give
  // (lock.token throws); grants and holders carry 0n.
  fencing: "none",
  fifo: false,
  // A quorum of independent nodes, not replicas agreeing by consensus.
  consensus: false,
  crossProcess: true,
  records: false,
  // No single store to keep a semaphore's queue and tokens (see above).
  semaphores: false,
  // SCAN over every node, each lock once; its holder is the one a quorum names.
  inspection: true,
  // The grant a quorum holds, freed on every node that has it (named by its payload).
  forceRelease: "grant",
};

/** How long opening a session waits for a quorum of nodes to connect, at least. */
const CONNECT_MIN_MS = 2_000;

/**
 * The `redlock://h1:p1,h2:p2,h3:p3,...` backend: the Redlock algorithm over an odd number of
 * independent Redis nodes.
 *
 * - acquire sends `SET NX PX` to every node in parallel, each bounded by `nodeTimeoutMs`; the
 *   lock is granted when `floor(N/2)+1` nodes said yes and its validity
 *   (`ttl - elapsed - drift`, drift = 1% of the TTL + 2 ms, on the monotonic clock) is left;
 *   a grant whose validity is gone is a failure, never a lock. A failed round is released on
 *   every node (including a minority that said yes) and a waiting acquire retries after a
 *   random delay;
 * - "held by someone else" resolves `null` (core: `LockHeldError` / `LockTimeoutError`);
 *   "fewer than a quorum of nodes answered" is `BackendUnavailableError`;
 * - renewals need a quorum within validity too; a key a quorum no longer holds for this
 *   session is reported lost.
 *
 * Fencing is `none`, declared honestly: its locks have no token (`lock.token` throws a
 * `ConfigError`; `holder()` reports `0n`). Use it for efficiency locks only; correctness mode
 * refuses it.
 */
export class RedlockBackend<C extends RedisClientLike | NodeRedisClientLike = RedisClientLike>
  implements LockBackend
{
  readonly kind = "redlock";
  readonly guarantees = REDLOCK_GUARANTEES;
  /** One client per node (yours, or the ones it made). */
  readonly nodes: readonly C[];
  /**
   * Where the backend connects: every node's `host:port` (or socket path), separated by
   * `", "`, e.g. `10.0.0.1:6379, 10.0.0.2:6379, 10.0.0.3:6379`; never the user nor the
   * password. Named in core's messages about it; undefined when no node says.
   */
  readonly endpoint: string | undefined;
  /**
   * {@link nodes} as ioredis' own type, for the calls the backend makes: each client itself,
   * or a node-redis client behind the wrapper that answers the same calls.
   */
  readonly #nodes: readonly Redis[];
  /** Prefix of every key. */
  readonly keyPrefix: string;
  readonly #owned: boolean;
  readonly #nodeTimeoutMs: number | undefined;
  readonly #retryMinMs: number;
  readonly #retryMaxMs: number;
  readonly #sessions = new Set<RedlockSession>();
  #closed = false;

  /** Checks `options` (a `ConfigError` naming the field) without any I/O. */
  constructor(options: RedlockBackendOptions<C>) {
    const resolved = resolveRedlockOptions(options, parseBackendUrl);
    this.keyPrefix = resolved.keyPrefix;
    this.#nodeTimeoutMs = resolved.nodeTimeoutMs;
    this.#retryMinMs = resolved.retryMinMs;
    this.#retryMaxMs = resolved.retryMaxMs;
    if (resolved.clients !== undefined) {
      // Checked by shape in resolveRedlockOptions: ioredis instances, whichever copy, or
      // node-redis clients, which the wrapper makes answer ioredis' calls.
      this.#nodes = resolved.clients.map((c) =>
        isNodeRedis(c) ? (asRedisClient(new NodeRedisClient(c)) as Redis) : (c as unknown as Redis),
      );
      this.#owned = false;
    } else {
      const url = resolved.url as BackendUrl;
      const common = ownedClientOptions(url, resolved.nodeTimeoutMs ?? 2_000);
      this.#nodes = url.hosts.map((h) => {
        const node = new Redis({ ...common, host: h.host, port: h.port ?? 6379 });
        node.on("error", () => undefined);
        return node;
      });
      this.#owned = true;
    }
    this.nodes = (resolved.clients ?? this.#nodes) as readonly C[];
    const addresses = this.#nodes.map(clientAddress).filter((a) => a !== undefined);
    this.endpoint = addresses.length === 0 ? undefined : addresses.join(", ");
  }

  /** Nodes that must agree: `floor(N/2)+1`. */
  get quorum(): number {
    return Math.floor(this.nodes.length / 2) + 1;
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError("this redlock backend is closed");
    if (!Number.isInteger(options.ttlMs) || options.ttlMs < 1) {
      throw new ConfigError("ttlMs", `must be a positive integer, got ${options.ttlMs}`);
    }
    const nodeTimeoutMs = this.#nodeTimeoutMs ?? defaultNodeTimeoutMs(options.ttlMs);
    await this.#quorumReady(Math.max(CONNECT_MIN_MS, nodeTimeoutMs), options.signal);
    const session = new RedlockSession(
      {
        nodes: this.#nodes,
        addresses: this.#nodes.map((node, i) => clientAddress(node) ?? `node ${i + 1}`),
        keyPrefix: this.keyPrefix,
        nodeTimeoutMs,
        retryMinMs: this.#retryMinMs,
        retryMaxMs: this.#retryMaxMs,
        onClose: (s) => this.#sessions.delete(s),
      },
      options.ownerId,
      options.ttlMs,
    );
    this.#sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#sessions].map((s) => s.close()));
    if (this.#owned) for (const node of this.#nodes) node.disconnect();
  }

  /** Resolves once a quorum of nodes is connected (the rest keep connecting in the background). */
  #quorumReady(timeoutMs: number, signal: AbortSignal | undefined): Promise<void> {
    const need = this.quorum;
    return new Promise((resolve, reject) => {
      let ready = 0;
      const failures: string[] = [];
      this.#nodes.forEach((node, i) => {
        const where = `redlock node ${clientAddress(node) ?? i + 1}`;
        whenReady(node, timeoutMs, where, signal, this.#owned ? "url" : "clients").then(
          () => {
            ready++;
            if (ready === need) resolve();
          },
          (error: unknown) => {
            failures.push(error instanceof Error ? error.message : String(error));
            if (signal?.aborted) reject(signal.reason);
            // Refused credentials are a configuration error: no other node makes them right.
            else if (error instanceof AuthenticationError) reject(error);
            else if (failures.length === this.nodes.length - need + 1) {
              reject(
                new BackendUnavailableError(
                  `redlock: fewer than ${need} of ${this.nodes.length} nodes could be reached (${failures.join("; ")}); check that Redis runs at each address and is reachable from here`,
                  { cause: error },
                ),
              );
            }
          },
        );
      });
    });
  }
}
