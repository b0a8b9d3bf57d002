import { connect } from "node:net";

/**
 * Opens a TCP connection, writes `request`, and collects the reply until the
 * server closes the connection or `isComplete` says the reply is whole.
 * Used by the readiness probes so they need no client library.
 *
 * @param host - server address
 * @param port - server port
 * @param request - bytes to send once connected
 * @param options.timeoutMs - overall limit, after which the promise rejects
 * @param options.isComplete - returns true once enough of the reply is in
 * @returns the reply as UTF-8 text
 */
export function tcpExchange(
  host: string,
  port: number,
  request: string,
  options: { timeoutMs?: number; isComplete?: (reply: string) => boolean } = {},
): Promise<string> {
  const { timeoutMs = 1000, isComplete } = options;
  return new Promise((resolve, reject) => {
    let reply = "";
    let settled = false;
    const socket = connect({ host, port });
    const finish = (error?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(reply);
    };
    const timer = setTimeout(
      () => finish(new Error(`no complete reply from ${host}:${port} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.setEncoding("utf8");
    socket.once("connect", () => socket.write(request));
    socket.on("data", (chunk: string) => {
      reply += chunk;
      if (isComplete?.(reply)) finish();
    });
    socket.once("end", () => finish());
    socket.once("error", (error) => finish(error));
  });
}
