import pg from "pg";
import type { PgConnectionConfig } from "./pg-shapes.js";

/**
 * How long a connection gets to end politely (pg's Terminate message, then the socket's own
 * close) before its socket is destroyed: a server that accepts connections and never answers
 * must not keep `close()` waiting.
 */
export const END_BOUND_MS = 500;

/**
 * How long a connection may take to be made (TCP, TLS, authentication) unless the settings
 * give `connectionTimeoutMillis` (the URL's `connect_timeout`): below the shortest bound core
 * puts on opening a session (5 s), so that a server that accepts connections and never answers
 * fails the open with an error that names it.
 */
export const CONNECT_TIMEOUT_MS = 4_000;

/** The settings of a new connection: `config`, with a connect timeout unless it gives one. */
function withConnectTimeout(config: PgConnectionConfig): pg.ClientConfig {
  // PgConnectionConfig describes pg's ClientConfig by shape: pg reads it as it is.
  return {
    ...(config as pg.ClientConfig),
    connectionTimeoutMillis: config.connectionTimeoutMillis ?? CONNECT_TIMEOUT_MS,
  };
}

/** How long a pool gets to end its connections before their sockets are destroyed. */
export const POOL_END_BOUND_MS = 1_000;

function noop(): void {}

/** The pool settings Baton sets on its own pools. */
interface PoolSettings {
  readonly max: number;
  readonly idleTimeoutMillis: number;
  readonly allowExitOnIdle: boolean;
}

/** Resolves when `promise` settles or after `ms`, whichever is first; never rejects. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    promise.then(noop, noop),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** Destroys the socket of `client`, which ends it at once (pg then emits `end`). */
function destroySocket(client: pg.Client): void {
  // A client never connected has a socket object that was never opened: destroying it is a no-op.
  client.connection?.stream?.destroy();
}

/**
 * Ends `client`: politely, then, if that has not finished within `boundMs`, by destroying its
 * socket. Never rejects.
 */
export async function endClient(client: pg.Client, boundMs = END_BOUND_MS): Promise<void> {
  await settledWithin(client.end(), boundMs);
  destroySocket(client);
}

/**
 * Every PostgreSQL connection a backend opens, its pools' included, so that closing the backend
 * ends them all in bounded time, also those still connecting or waiting on a server that never
 * answers.
 */
export class Connections {
  readonly #clients = new Set<pg.Client>();
  /** A `pg.Client` class whose clients are tracked: for a `pg.Pool`'s `Client` option. */
  readonly Client: typeof pg.Client;

  constructor() {
    const clients = this.#clients;
    this.Client = class TrackedClient extends pg.Client {
      constructor(config?: string | pg.ClientConfig) {
        super(config);
        clients.add(this);
        this.once("end", () => clients.delete(this));
      }
    };
  }

  /** A new, tracked client (not connected), with a connect timeout unless `config` gives one. */
  client(config: PgConnectionConfig): pg.Client {
    return new this.Client(withConnectTimeout(config));
  }

  /** A new pool whose connections are tracked, with a connect timeout unless `config` gives one. */
  pool(config: PgConnectionConfig & PoolSettings): pg.Pool {
    const { max, idleTimeoutMillis, allowExitOnIdle, ...connection } = config;
    return new pg.Pool({
      ...withConnectTimeout(connection),
      max,
      idleTimeoutMillis,
      allowExitOnIdle,
      Client: this.Client,
    });
  }

  /**
   * Ends `pool` (its idle connections politely), waiting at most {@link POOL_END_BOUND_MS}:
   * {@link destroyAll} ends whatever it still has. Never rejects.
   */
  async endPool(pool: pg.Pool): Promise<void> {
    await settledWithin(pool.end(), POOL_END_BOUND_MS);
  }

  /** Destroys the socket of every connection still open (or opening). */
  destroyAll(): void {
    for (const client of this.#clients) destroySocket(client);
    this.#clients.clear();
  }
}
