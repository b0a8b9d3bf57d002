import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * What a {@link TcpProxy} does with traffic: `forward` (optionally late), `blackhole` (drop
 * everything), `cut` (reset and refuse), `drop-replies` (requests reach the server, its
 * replies never reach the client).
 */
export type ProxyMode = "forward" | "blackhole" | "cut" | "drop-replies";

/** Bytes bound one way on one connection, delivered in order, each no earlier than `at`. */
class Lane {
  readonly #to: Socket;
  readonly #queue: { at: number; chunk: Buffer }[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(to: Socket) {
    this.#to = to;
  }

  push(chunk: Buffer, delayMs: number): void {
    if (delayMs === 0 && this.#queue.length === 0) {
      this.#to.write(chunk);
      return;
    }
    this.#queue.push({ at: performance.now() + delayMs, chunk });
    this.#schedule();
  }

  clear(): void {
    this.#queue.length = 0;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    const head = this.#queue[0];
    if (head === undefined) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        const now = performance.now();
        // Later chunks never overtake earlier ones, whatever delay they were sent with.
        while (this.#queue.length > 0 && (this.#queue[0] as { at: number }).at <= now + 1) {
          const { chunk } = this.#queue.shift() as { chunk: Buffer };
          if (!this.#to.destroyed) this.#to.write(chunk);
        }
        this.#schedule();
      },
      Math.max(0, head.at - performance.now()),
    );
  }
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Client to server. */
  readonly requests: Lane;
  /** Server to client. */
  readonly replies: Lane;
}

/**
 * A TCP proxy on loopback for fault tests: put it between a client and one server, then
 * `blackhole()` (connections stay open, every byte is dropped: a partition as the client sees
 * it), `cut()` (every connection is reset and new ones are refused), `delay(ms)` (both ways),
 * `delayReplies(ms)` (the server's answers only), `dropReplies()` (requests still reach the
 * server, which acts on them, but no answer comes back), `resetNextRequest()` (one request's
 * connection is reset before the server sees it), or `forward()` again.
 *
 * @example
 * const proxy = await TcpProxy.start({ host: "127.0.0.1", port: 6379 });
 * const url = `redis://127.0.0.1:${proxy.port}`;
 * proxy.blackhole(); // the client can no longer reach the server
 */
export class TcpProxy {
  /** Listening host (always 127.0.0.1). */
  readonly host = "127.0.0.1";
  /** Listening port. */
  readonly port: number;
  readonly #server: Server;
  readonly #target: { host: string; port: number };
  readonly #pairs = new Set<Pair>();
  #mode: ProxyMode = "forward";
  #resetNext = false;
  #requestsReset = 0;
  #delayMs = 0;
  #replyDelayMs = 0;

  private constructor(server: Server, port: number, target: { host: string; port: number }) {
    this.#server = server;
    this.port = port;
    this.#target = target;
    server.on("connection", (client) => this.#accept(client));
  }

  /** Starts a proxy to `target` on a free loopback port. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("proxy: no port");
    return new TcpProxy(server, address.port, target);
  }

  /** Current mode. */
  get mode(): ProxyMode {
    return this.#mode;
  }

  /** Number of client connections open through the proxy. */
  get connections(): number {
    return this.#pairs.size;
  }

  /** Forwards traffic (the default), with no delay. */
  forward(): void {
    this.#mode = "forward";
    this.#delayMs = 0;
    this.#replyDelayMs = 0;
  }

  /** Forwards traffic both ways, each chunk `ms` late. */
  delay(ms: number): void {
    this.#mode = "forward";
    this.#delayMs = ms;
    this.#replyDelayMs = ms;
  }

  /** Forwards requests at once and every reply `ms` late (in order). */
  delayReplies(ms: number): void {
    this.#mode = "forward";
    this.#delayMs = 0;
    this.#replyDelayMs = ms;
  }

  /**
   * Forwards requests, drops every reply (also replies still waiting out a delay): the server
   * acts on what the client sends, and the client never hears back.
   */
  dropReplies(): void {
    this.#mode = "drop-replies";
    for (const pair of this.#pairs) pair.replies.clear();
  }

  /** Keeps connections open but drops every byte both ways; new connections hang too. */
  blackhole(): void {
    this.#mode = "blackhole";
    for (const pair of this.#pairs) {
      pair.requests.clear();
      pair.replies.clear();
    }
  }

  /** Resets every connection and refuses new ones until `forward()`. */
  cut(): void {
    this.#mode = "cut";
    for (const pair of this.#pairs) {
      pair.requests.clear();
      pair.replies.clear();
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.#pairs.clear();
  }

  /**
   * Resets the connection that carries the next request, before any of it reaches the
   * server, then forwards as before: what a client meets when it reuses a keep-alive socket
   * the server has just closed. New connections are not affected until a request is sent.
   */
  resetNextRequest(): void {
    this.#resetNext = true;
  }

  /** How many connections `resetNextRequest()` has reset so far. */
  get requestsReset(): number {
    return this.#requestsReset;
  }

  /** Closes the proxy and every connection through it. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    if (this.#mode === "cut") {
      client.destroy();
      return;
    }
    const upstream = connect(this.#target.port, this.#target.host);
    const pair: Pair = {
      client,
      upstream,
      requests: new Lane(upstream),
      replies: new Lane(client),
    };
    this.#pairs.add(pair);
    const end = () => {
      this.#pairs.delete(pair);
      pair.requests.clear();
      pair.replies.clear();
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
    client.on("data", (chunk: Buffer) => {
      if (this.#resetNext) {
        this.#resetNext = false;
        this.#requestsReset++;
        client.resetAndDestroy();
        end();
        return;
      }
      if (this.#mode === "forward" || this.#mode === "drop-replies")
        pair.requests.push(chunk, this.#delayMs);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (this.#mode === "forward") pair.replies.push(chunk, this.#replyDelayMs);
    });
  }
}
