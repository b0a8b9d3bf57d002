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

/**
 * A node-redis client as Baton uses it: the shape of what `createClient()` or
 * `createCluster()` of the `redis` package returns (node-redis 4, 5 and 6), described without
 * naming node-redis' own types. Pass your own connected client as
 * {@link RedisBackendOptions.client}; Baton tells it from an ioredis one by this shape.
 *
 * Baton runs its Lua scripts on it (`sendCommand` with `EVALSHA` or `EVAL`, every argument a
 * string; a cluster's by the script's first key), reads records with `hmGet`, leaves a wait line with `zRem`, connects it if it is not open yet
 * (`isOpen`, `connect`, the `ready` and `error` events while it waits), and makes one
 * `duplicate()` of it for its release subscriber (`subscribe`, `unsubscribe`), which it
 * connects and closes itself. Replies are read in node-redis' default types, whatever type
 * mapping your client has. It never quits or closes your client.
 */
export interface NodeRedisClientLike {
  /** Whether the client is connected or connecting. */
  readonly isOpen: boolean;
  /** Opens the connection (only when {@link NodeRedisClientLike.isOpen} is false). */
  connect(): Promise<unknown>;
  /** A new client with the same options (Baton's release subscriber). */
  duplicate(): NodeRedisClientLike;
  /** Listens for `ready`, `error`, `end`, and on a Cluster `connect` and `node-error`. */
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  /** Stops listening. */
  off(event: string, listener: (...args: unknown[]) => void): unknown;
  /** node-redis' EVALSHA: how Baton tells a node-redis client from an ioredis one. */
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /**
   * Sends a raw command: `sendCommand(args)` on a client, `sendCommand(firstKey, isReadonly,
   * args)` on a cluster. Baton runs its Lua scripts with it (`EVALSHA`, then `EVAL` for a
   * script the server does not know yet), every argument a string.
   */
  sendCommand(...args: never[]): Promise<unknown>;
  /** Reads fields of a hash (a `runOnce` record). */
  hmGet(key: string, fields: string[]): Promise<unknown>;
  /** Removes a member of a sorted set (a waiter leaving a lock's line). */
  zRem(key: string, member: string): Promise<unknown>;
  /** Subscribes the subscriber to channels; `listener` gets `(message, channel)`. */
  subscribe(channels: string[], listener: NodeRedisListener): Promise<unknown>;
  /** Unsubscribes the subscriber's `listener` from channels. */
  unsubscribe(channels: string[], listener: NodeRedisListener): Promise<unknown>;
}

/** A node-redis channel listener: `(message, channel)`, strings unless in buffer mode. */
export type NodeRedisListener = (
  message: string | Uint8Array,
  channel: string | Uint8Array,
) => void;
