import { connect } from "node:net";

/** The first byte of a MySQL/MariaDB server greeting: protocol version 10. */
const PROTOCOL_VERSION_10 = 0x0a;
/** A packet header is a 3-byte length and a sequence number; the payload follows. */
const PACKET_HEADER_BYTES = 4;

/**
 * Connects to a MariaDB or MySQL server on TCP and reads its greeting, with no client library.
 *
 * @returns true when the server greets with protocol version 10 (false for an error packet such
 *   as "too many connections", or any connection error)
 */
export function mariadbPing(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    let received = Buffer.alloc(0);
    const socket = connect({ host, port });
    const finish = (ready: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(ready);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length > PACKET_HEADER_BYTES) {
        finish(received[PACKET_HEADER_BYTES] === PROTOCOL_VERSION_10);
      }
    });
    socket.once("end", () => finish(false));
    socket.once("error", () => finish(false));
  });
}
