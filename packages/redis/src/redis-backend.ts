import type {
  BackendSession,
  BackendUrl,
  Guarantees,
  LockBackend,
  OpenSessionOptions,
} from "@baton/core";
import { BackendUnavailableError, ConfigError, parseBackendUrl } from "@baton/core";
import { clientAddress } from "./client-address.js";
import { asRedisClient, isNodeRedis, NodeRedisClient } from "./node-redis-client.js";
import { clientFromUrl, duplicateForSubscriber, type RedisClient } from "./redis-client.js";
import type { NodeRedisClientLike, RedisClientLike } from "./redis-client-like.js";
import { type RedisBackendOptions, resolveRedisOptions } from "./redis-options.js";
import { RedisSession } from "./redis-session.js";
import { ReleaseListener } from "./release-listener.js";
import { whenReady } from "./when-ready.js";

/** What the `redis://` / `rediss://` backend guarantees (its `guarantees` field). */
export const REDIS_GUARANTEES: Guarantees = {
  // INCR on the node that holds the lock: rises while that node keeps its data; a lost
  // counter starts again at the server's clock in microseconds (see the README).
  fencing: "single-node",
  // Waiters stand in a line by arrival; a release hands the lock to the first of them.
  fifo: true,
  consensus: false,
  crossProcess: true,
  records: true,
  // One queue per semaphore in one slot, tokens from its own counter (the same fencing).
  semaphores: true,
  // SCAN over the node (every master of a Cluster); one script call per key read.
  inspection: true,
  // One grant by token, in one script call; the holder's renewal reads the revocation.
  forceRelease: "grant",
};

/**
 * The `redis://` / `rediss://` backend: one Redis node (or a Redis Cluster, each lock in the
 * slot of its name).
 *
 * - acquire is one script call: `SET lock NX PX ttl` and `INCR` of the lock's token counter,
 *   with session, token, owner and value stored together in the lock key; when held, the same
 *   call answers the holder's remaining PTTL;
 * - a session renews everything it holds with one script call per interval (one per key on a
 *   Cluster), owner-checked per grant, and reports exactly which keys it lost;
 * - release is an owner-checked delete plus a publish on the lock's channel, in one call;
 * - waiters share one subscriber connection and wake on the release message or when the
 *   holder's PTTL runs out, whichever is first (no polling);
 * - semaphores and read-write locks: one queue of holders and waiters per name, in the slot
 *   of the name; an acquire and a release are one script call each, a grant to a waiter is
 *   told on its turn channel, and a session's renewal raises one lease deadline per name,
 *   however many permits it holds there (a dead session's permits go within its TTL).
 *
 * Fencing is `single-node`: tokens rise while the node keeps its data. A counter lost with it
 * (a restart without persistence, FLUSHALL) starts again at the server's clock in
 * microseconds, above every earlier token as long as that clock did not go back and fewer than
 * one token per microsecond was handed out on average; a failover to a lagging replica, a
 * reload of an older snapshot or a clock stepped back can repeat tokens. Correctness mode
 * refuses it.
 *
 * `C` is the type of your own client (an ioredis or a node-redis one), when you pass one.
 */
export class RedisBackend<C extends RedisClientLike | NodeRedisClientLike = RedisClientLike>
  implements LockBackend
{
  readonly kind = "redis";
  readonly guarantees = REDIS_GUARANTEES;
  /** The client the backend runs its scripts on: yours, or the ioredis one it made. */
  readonly client: C;
  /** Prefix of every key and channel. */
  readonly keyPrefix: string;
  /**
   * Where the backend connects, e.g. `127.0.0.1:6379`, a cluster's startup nodes
   * (`10.0.0.1:7000, 10.0.0.2:7000`) or a socket path; never the user nor the password. Named
   * in core's messages about it; undefined when the client does not say.
   */
  readonly endpoint: string | undefined;
  /**
   * {@link client} as ioredis' own type, for the calls the backend makes: the client itself,
   * or a node-redis client behind {@link NodeRedisClient}, which answers the same calls.
   */
  readonly #client: RedisClient;
  readonly #owned: boolean;
  readonly #cluster: boolean;
  readonly #timeoutMs: number;
  readonly #listener: ReleaseListener;
  /** Where the store is, for messages: `redis 127.0.0.1:6379`; never credentials. */
  readonly #where: string;
  readonly #sessions = new Set<RedisSession>();
  #closed = false;

  /** Checks `options` (a `ConfigError` naming the field) without any I/O. */
  constructor(options: RedisBackendOptions<C>) {
    const resolved = resolveRedisOptions(options, parseBackendUrl);
    this.keyPrefix = resolved.keyPrefix;
    this.#cluster = resolved.cluster;
    this.#timeoutMs = resolved.commandTimeoutMs;
    if (resolved.client !== undefined) {
      // Checked by shape in resolveRedisOptions: an ioredis instance, whichever copy, or a
      // node-redis one, which the wrapper makes answer ioredis' calls.
      this.#client = isNodeRedis(resolved.client)
        ? asRedisClient(new NodeRedisClient(resolved.client))
        : (resolved.client as unknown as RedisClient);
      this.#owned = false;
    } else {
      this.#client = clientFromUrl(
        resolved.url as BackendUrl,
        resolved.cluster,
        this.#timeoutMs,
        resolved.natMap,
      );
      this.#owned = true;
    }
    this.client = (resolved.client ?? this.#client) as C;
    const client = this.#client;
    const address = clientAddress(client);
    this.endpoint = address;
    this.#where = address === undefined ? "redis" : `redis ${address}`;
    this.#listener = new ReleaseListener(
      () => duplicateForSubscriber(client),
      this.#timeoutMs,
      this.#where,
    );
  }

  async openSession(options: OpenSessionOptions): Promise<BackendSession> {
    if (this.#closed) throw new BackendUnavailableError(`${this.#where}: this backend is closed`);
    if (!Number.isInteger(options.ttlMs) || options.ttlMs < 1) {
      throw new ConfigError("ttlMs", `must be a positive integer, got ${options.ttlMs}`);
    }
    const address = clientAddress(this.#client);
    await whenReady(
      this.#client,
      this.#timeoutMs,
      address === undefined ? "redis" : `redis at ${address}`,
      options.signal,
      this.#owned ? "url" : "client",
    );
    const session = new RedisSession(
      {
        client: this.#client,
        where: this.#where,
        cluster: this.#cluster,
        keyPrefix: this.keyPrefix,
        commandTimeoutMs: this.#timeoutMs,
        listener: this.#listener,
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
    this.#listener.close();
    if (this.#owned) this.#client.disconnect();
  }
}
