import { connect, createServer, type Server, type Socket } from "node:net";

/** What a {@link TcpProxy} does with traffic. */
export type ProxyMode = "forward" | "blackhole" | "cut";

/**
 * A TCP proxy on loopback for fault tests: put it between a client and one server, then
 * `blackhole()` (connections stay open, every byte is dropped: a partition as the client sees
 * it), `cut()` (every connection is reset and new ones are refused), `delay(ms)`, or
 * `forward()` again.
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
  readonly #pairs = new Set<{ client: Socket; upstream: Socket }>();
  #mode: ProxyMode = "forward";
  #delayMs = 0;

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
  }

  /** Forwards traffic, each chunk `ms` late. */
  delay(ms: number): void {
    this.#mode = "forward";
    this.#delayMs = ms;
  }

  /** Keeps connections open but drops every byte both ways; new connections hang too. */
  blackhole(): void {
    this.#mode = "blackhole";
  }

  /** Resets every connection and refuses new ones until `forward()`. */
  cut(): void {
    this.#mode = "cut";
    for (const pair of this.#pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.#pairs.clear();
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
    const pair = { client, upstream };
    this.#pairs.add(pair);
    const end = () => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
    client.on("data", (chunk) => this.#pass(chunk, upstream));
    upstream.on("data", (chunk) => this.#pass(chunk, client));
  }

  #pass(chunk: Buffer, to: Socket): void {
    if (this.#mode !== "forward") return;
    if (this.#delayMs === 0) {
      to.write(chunk);
      return;
    }
    setTimeout(() => {
      if (this.#mode === "forward" && !to.destroyed) to.write(chunk);
    }, this.#delayMs);
  }
}
