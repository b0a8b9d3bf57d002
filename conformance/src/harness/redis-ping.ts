import { tcpExchange } from "./tcp-exchange.js";

/**
 * Sends a RESP `PING` to a Redis server.
 *
 * @returns true when it answers `+PONG` (false while it is loading, or on
 *   any connection error)
 */
export async function redisPing(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  try {
    const reply = await tcpExchange(host, port, "*1\r\n$4\r\nPING\r\n", {
      timeoutMs,
      isComplete: (text) => text.includes("\r\n"),
    });
    return reply.startsWith("+PONG");
  } catch {
    return false;
  }
}
