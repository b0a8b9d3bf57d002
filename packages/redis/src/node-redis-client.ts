import { EventEmitter } from "node:events";
import type { RedisClient } from "./redis-client.js";
import type { NodeRedisClientLike } from "./redis-client-like.js";
import type { ScanTarget } from "./scan-targets.js";

/** Where a node-redis client or cluster connects, as its options say. */
interface NodeRedisOptions {
  readonly url?: unknown;
  readonly socket?: { readonly host?: unknown; readonly port?: unknown; readonly path?: unknown };
  readonly rootNodes?: readonly {
    readonly url?: unknown;
    readonly socket?: { readonly host?: unknown; readonly port?: unknown };
  }[];
}

/** What a node-redis client or cluster has beyond {@link NodeRedisClientLike}, when it has it. */
interface NodeRedisExtras {
  readonly isReady?: boolean;
  readonly options?: NodeRedisOptions;
  readonly _options?: NodeRedisOptions;
  /** A Cluster's (node-redis 4 and later). */
  getSlotRandomNode?(slot: number): unknown;
  /** A Cluster's masters, once connected: `{ host, port }` each. */
  readonly masters?: readonly unknown[];
  /** A Cluster's client of one of its nodes (node-redis 4 and later). */
  nodeClient?(node: unknown): unknown;
  /** node-redis 5 and later: the same client with other reply types (Baton's: the defaults). */
  withTypeMapping?(mapping: object): NodeRedisClientLike;
  /** node-redis 5 and later: closes at once. */
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
}

type ClientSend = (args: string[]) => Promise<unknown>;
type ClusterSend = (
  firstKey: string | undefined,
  isReadonly: boolean,
  args: string[],
) => Promise<unknown>;

/** A node-redis client or cluster, with what Baton reads from it when present. */
type NodeRedis = NodeRedisClientLike & NodeRedisExtras;

/**
 * Whether `client` is a node-redis (`redis` package) client or cluster rather than an ioredis
 * one, by shape: node-redis names the command `evalSha` and has `isOpen`; ioredis has
 * `evalsha` and `status`.
 */
export function isNodeRedis(client: unknown): client is NodeRedisClientLike {
  const c = client as Partial<NodeRedisClientLike & { evalsha: unknown }> | null;
  return (
    c !== null &&
    typeof c === "object" &&
    typeof c.evalSha === "function" &&
    typeof c.sendCommand === "function" &&
    typeof c.evalsha !== "function" &&
    typeof c.isOpen === "boolean"
  );
}

/**
 * Whether `client` is a node-redis 4 client created with `legacyMode: true` (its `options`
 * say so, as its `v4` getter reads them): its commands answer through callbacks, not promises,
 * and it also has ioredis' lowercase names (`evalsha`), so it looks like neither client.
 */
export function isLegacyNodeRedis(client: unknown): boolean {
  const c = client as { isOpen?: unknown; options?: { legacyMode?: unknown } } | null;
  return (
    c !== null &&
    typeof c === "object" &&
    typeof c.isOpen === "boolean" &&
    c.options?.legacyMode === true
  );
}

/** Why a legacy-mode client is refused, and what to pass instead. */
export const LEGACY_MODE_REFUSED =
  "is a node-redis client created with legacyMode: true, whose commands answer through callbacks; pass one created without legacyMode, such as client.duplicate({ legacyMode: false })";

/** The events {@link NodeRedisClient} reports, by the name ioredis gives them. */
type Event = "ready" | "error" | "end" | "node error" | "message";

/**
 * A node-redis client or cluster (v4 and later) seen through the calls the adapter makes of an
 * ioredis one: `evalsha`/`eval` with a key count and argument arrays, `hmget`, `zrem`,
 * `status`, `connect`, the `ready`/`error`/`end` events, and a `duplicate()` subscriber whose
 * `subscribe` reports `message` events. Chosen once, when the backend is built; an ioredis
 * client is used as it is, so its calls go through nothing of this.
 *
 * node-redis takes script arguments as strings (numbers are refused by v4 and v5), routes a
 * Cluster call by its first key and follows `MOVED`/`ASK` itself, and queues commands while
 * it reconnects. Replies come back in node-redis' default types whatever type mapping the app
 * set on its client (`withTypeMapping({})` where the client has it).
 */
export class NodeRedisClient {
  readonly isCluster: boolean;
  /** Where the client connects, in the shape client-address.ts reads. */
  readonly options: { readonly host?: string; readonly port?: number; readonly path?: string };
  readonly startupNodes: readonly unknown[] | undefined;
  /** The app's client, or a subscriber this wrapper made and owns. */
  readonly #raw: NodeRedis;
  /** {@link #raw} with node-redis' default reply types: what the commands run on. */
  readonly #calls: NodeRedisClientLike;
  readonly #owned: boolean;
  readonly #events = new EventEmitter();
  /** Listeners this wrapper has on {@link #raw} (the event's name there), while someone listens. */
  readonly #hooks = new Map<Event, { name: string; forward: (...args: unknown[]) => void }>();
  /** Baton's channels are subscribed in string mode: message and channel are strings. */
  readonly #onMessage = (message: string | Uint8Array, channel: string | Uint8Array) =>
    this.#events.emit("message", String(channel), String(message));
  #ended = false;
  /**
   * Sends one command, as strings, on {@link #calls}: a Cluster's to the master of the slot of
   * `firstKey` (node-redis follows `MOVED` and `ASK`). Raw `sendCommand` rather than
   * `evalSha`/`eval`: a Cluster of node-redis 4 routes those to a random node (it reads the
   * first key from the wrong argument), and its retry after a `MOVED` to another random one;
   * and they cost more client CPU per call (node-redis 6: 43 us through `withTypeMapping`,
   * against 37 us for `sendCommand`).
   */
  readonly #send: (firstKey: string | undefined, args: string[]) => Promise<unknown>;
  /** A subscriber's first connection: its SUBSCRIBE waits for it (no offline queue needed). */
  #connected: Promise<unknown> = Promise.resolve();

  constructor(client: NodeRedisClientLike, owned = false) {
    const raw = client as NodeRedis;
    this.#raw = raw;
    this.#owned = owned;
    this.#calls = typeof raw.withTypeMapping === "function" ? raw.withTypeMapping({}) : raw;
    this.isCluster = typeof raw.getSlotRandomNode === "function";
    const calls = this.#calls;
    const send: unknown = calls.sendCommand;
    this.#send = this.isCluster
      ? (firstKey, args) => (send as ClusterSend).call(calls, firstKey, false, args)
      : (_firstKey, args) => (send as ClientSend).call(calls, args);
    // A Cluster of node-redis 5 and 6 keeps its options as `_options`; node-redis 4 keeps them
    // private, and its known masters say where it is.
    const options = raw.options ?? raw._options;
    this.startupNodes = this.isCluster
      ? (options?.rootNodes?.map(socketAddress) ?? raw.masters ?? [])
      : undefined;
    this.options = this.isCluster ? {} : socketAddress(options);
  }

  /** ioredis' states, as far as node-redis tells: `ready`, `connecting`, `wait` or `end`. */
  get status(): string {
    if (this.#ended) return "end";
    const raw = this.#raw;
    if (!raw.isOpen) return "wait";
    // A Cluster of node-redis 4 and 5 has no isReady: open means its slots are known.
    return raw.isReady !== false ? "ready" : "connecting";
  }

  /** Connects a client that is not open; `ready` or `error` follow, as with ioredis. */
  connect(): Promise<unknown> {
    return this.#raw.connect().then(
      () => {
        // A Cluster says nothing more once its slots are known.
        if (this.isCluster) this.#events.emit("ready");
      },
      (error: unknown) => {
        if (this.#events.listenerCount("error") > 0) this.#events.emit("error", error);
        throw error;
      },
    );
  }

  /** Closes a subscriber this wrapper made; never the app's own client. */
  disconnect(): void {
    if (!this.#owned || this.#ended) return;
    this.#ended = true;
    const raw = this.#raw;
    const closing = typeof raw.destroy === "function" ? raw.destroy() : raw.disconnect?.();
    Promise.resolve(closing).catch(() => undefined);
  }

  /**
   * A subscriber connection of its own, connecting at once. Commands wait in node-redis'
   * queue until it is connected, and it subscribes again to its channels after a reconnect.
   */
  duplicate(): NodeRedisClient {
    const raw = this.#raw.duplicate();
    raw.on("error", () => undefined);
    const subscriber = new NodeRedisClient(raw, true);
    subscriber.#connected = subscriber.connect();
    subscriber.#connected.catch(() => undefined);
    return subscriber;
  }

  on(event: Event, listener: (...args: unknown[]) => void): this {
    this.#hook(event);
    this.#events.on(event, listener);
    return this;
  }

  off(event: Event, listener: (...args: unknown[]) => void): this {
    this.#events.off(event, listener);
    if (this.#events.listenerCount(event) === 0) this.#unhook(event);
    return this;
  }

  evalsha(
    sha: string,
    _numKeys: number,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return this.#send(keys[0], ["EVALSHA", sha, String(keys.length), ...keys, ...args.map(String)]);
  }

  eval(
    source: string,
    _numKeys: number,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return this.#send(keys[0], ["EVAL", source, String(keys.length), ...keys, ...args.map(String)]);
  }

  hmget(key: string, ...fields: string[]): Promise<unknown> {
    return this.#calls.hmGet(key, fields);
  }

  zrem(key: string, member: string): Promise<unknown> {
    return this.#calls.zRem(key, member);
  }

  /**
   * The nodes a listing walks with SCAN: this client's node, or each master of a Cluster (by
   * node-redis' client of that master), in address order.
   */
  async scanTargets(): Promise<ScanTarget[]> {
    const scanArgs = (cursor: string, pattern: string, count: number) => [
      "SCAN",
      cursor,
      "MATCH",
      pattern,
      "COUNT",
      String(count),
    ];
    if (!this.isCluster) {
      return [
        {
          address: "",
          scan: async (cursor, pattern, count) =>
            (await this.#send(undefined, scanArgs(cursor, pattern, count))) as [string, string[]],
        },
      ];
    }
    const raw = this.#raw;
    const masters = (raw.masters ?? []) as readonly { host?: unknown; port?: unknown }[];
    return masters
      .map((master) => ({
        address: `${String(master.host)}:${String(master.port)}`,
        scan: async (cursor: string, pattern: string, count: number) => {
          const node = (await raw.nodeClient?.(master)) as {
            sendCommand(args: string[]): Promise<unknown>;
          };
          return (await node.sendCommand(scanArgs(cursor, pattern, count))) as [string, string[]];
        },
      }))
      .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  }

  subscribe(...channels: string[]): Promise<unknown> {
    return this.#connected.then(() => this.#raw.subscribe(channels, this.#onMessage));
  }

  unsubscribe(...channels: string[]): Promise<unknown> {
    return this.#raw.unsubscribe(channels, this.#onMessage);
  }

  /**
   * Listens on the node-redis client for what `event` means there, only while someone listens
   * here: an app's client keeps no listener of Baton's in between (an `error` listener would
   * hide the app's unhandled connection errors from it).
   */
  #hook(event: Event): void {
    if (event === "message" || this.#hooks.has(event)) return;
    const forward =
      event === "node error"
        ? (error: unknown, node: unknown) => this.#events.emit(event, error, nodeName(node))
        : (...args: unknown[]) => this.#events.emit(event, ...args);
    // A Cluster tells it is ready with "connect" (node-redis 4 and 5 have no "ready" on it),
    // and names a failing node with "node-error" (node-redis 5 and later).
    const name =
      event === "node error"
        ? "node-error"
        : this.isCluster && event === "ready"
          ? "connect"
          : event;
    const listener = forward as (...args: unknown[]) => void;
    this.#hooks.set(event, { name, forward: listener });
    this.#raw.on(name, listener);
  }

  #unhook(event: Event): void {
    const hook = this.#hooks.get(event);
    if (hook === undefined) return;
    this.#hooks.delete(event);
    this.#raw.off(hook.name, hook.forward);
  }
}

/** `as unknown as RedisClient`: the wrapper answers every call the adapter makes. */
export function asRedisClient(client: NodeRedisClient): RedisClient {
  return client as unknown as RedisClient;
}

function socketAddress(options: NodeRedisOptions | undefined): {
  host?: string;
  port?: number;
  path?: string;
} {
  const socket = options?.socket;
  if (typeof socket?.path === "string") return { path: socket.path };
  if (typeof socket?.host === "string") {
    return { host: socket.host, port: typeof socket.port === "number" ? socket.port : 6379 };
  }
  if (typeof options?.url === "string") {
    try {
      const url = new URL(options.url);
      return { host: url.hostname, port: url.port === "" ? 6379 : Number(url.port) };
    } catch {
      return {};
    }
  }
  return { host: "localhost", port: typeof socket?.port === "number" ? socket.port : 6379 };
}

/** `host:port` of a node-redis Cluster's node info (`{ host, port }`), when it has one. */
function nodeName(node: unknown): string | undefined {
  const n = node as { host?: unknown; port?: unknown } | undefined;
  return typeof n?.host === "string" && typeof n.port === "number"
    ? `${n.host}:${n.port}`
    : undefined;
}
