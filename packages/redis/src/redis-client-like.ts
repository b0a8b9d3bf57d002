/**
 * A Redis client as Baton uses it: the shape of an ioredis `Redis` or `Cluster` instance
 * (ioredis 5.4 and later, 6.x), described without naming ioredis' own types, so that your
 * build type-checks Baton's declarations whatever ioredis release you have installed. Pass your
 * own instance as {@link RedisBackendOptions.client} (or one per node as
 * {@link RedlockBackendOptions.clients}); any ioredis `Redis` or `Cluster` fits.
 *
 * Baton runs its Lua scripts on it (`evalsha`, `eval`), waits for it to be ready (`status`,
 * `connect`, `on`/`off`), and makes one `duplicate()` of it for its release subscriber, which
 * it closes again on `close()`. It never quits or disconnects your instance itself.
 */
export interface RedisClientLike {
  /** ioredis' connection state: `"wait"`, `"connecting"`, `"ready"`, `"end"`, ... */
  readonly status: string;
  /** `true` for a Redis Cluster client. */
  readonly isCluster: boolean;
  /** Starts the connection of a lazy client. */
  connect(): Promise<unknown>;
  /** Closes the connection at once (used on the backend's own connections only). */
  disconnect(): void;
  /** A new connection with the same options (Baton's release subscriber). */
  duplicate(): RedisClientLike;
  /** Listens for `ready`, `error`, `end` and, on a subscriber, `message`. */
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  /** Stops listening. */
  off(event: string, listener: (...args: unknown[]) => void): unknown;
  /** Runs a loaded Lua script by its SHA1. */
  evalsha(sha: string, numKeys: number, ...args: unknown[]): Promise<unknown>;
  /** Runs (and loads) a Lua script. */
  eval(script: string, numKeys: number, ...args: unknown[]): Promise<unknown>;
  /** Subscribes a subscriber connection to channels. */
  subscribe(...channels: string[]): Promise<unknown>;
  /** Unsubscribes a subscriber connection from channels. */
  unsubscribe(...channels: string[]): Promise<unknown>;
}
