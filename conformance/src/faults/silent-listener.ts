import { createServer, type Server, type Socket } from "node:net";
import { waitUntil } from "../harness/wait-until.js";

/**
 * A TCP listener on loopback that accepts every connection and never sends a byte: a store
 * that is up as far as the kernel is concerned but does not answer (a hung process, a
 * firewall that drops replies). Use it to check that connecting, acquiring and `close()` are
 * bounded whatever the store does.
 *
 * @example
 * const silent = await SilentListener.start();
 * const backend = new RedisBackend({ url: `redis://127.0.0.1:${silent.port}` });
 * await backend.close(); // must settle in bounded time
 * await silent.close();
 */
export class SilentListener {
  /** Listening host (always 127.0.0.1). */
  readonly host = "127.0.0.1";
  /** Listening port. */
  readonly port: number;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #accepted = 0;

  private constructor(server: Server, port: number, sockets: Set<Socket>) {
    this.#server = server;
    this.port = port;
    this.#sockets = sockets;
    server.on("connection", () => {
      this.#accepted++;
    });
  }

  /** Starts listening on a free loopback port. */
  static async start(): Promise<SilentListener> {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => sockets.delete(socket));
      // Reads nothing back: bytes are consumed and dropped so the client's writes never block.
      socket.resume();
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    return new SilentListener(server, address.port, sockets);
  }

  /** Connections accepted so far. */
  get accepted(): number {
    return this.#accepted;
  }

  /** Connections still open. */
  get open(): number {
    return this.#sockets.size;
  }

  /**
   * Resolves once `condition` holds of this listener, checking every 20 ms: for a test to wait
   * until a client has connected, or until every connection it made is gone.
   *
   * @param condition - reads {@link SilentListener.accepted} or {@link SilentListener.open}
   * @param timeoutMs - give up after this long
   * @throws Error when the condition does not hold within `timeoutMs`
   *
   * @example
   * await silent.until((s) => s.accepted > 0);
   * await backend.close();
   * await silent.until((s) => s.open === 0);
   */
  until(condition: (listener: SilentListener) => boolean, timeoutMs = 10_000): Promise<void> {
    return waitUntil(
      `the silent listener on port ${this.port}: the awaited connections`,
      timeoutMs,
      async () => condition(this),
      20,
    );
  }

  /** Stops listening and destroys every accepted connection. */
  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
