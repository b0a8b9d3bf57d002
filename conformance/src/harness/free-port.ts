import { createServer, type Server } from "node:net";

/** Ports handed out by this process, so parallel callers never get the same one. */
const handedOut = new Set<number>();

function listenOnEphemeralPort(host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host, port: 0, exclusive: true }, () => resolve(server));
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * Finds `count` distinct free TCP ports on `host` by binding port 0.
 *
 * All sockets are held open together so the ports are distinct, then closed.
 * Ports already handed out earlier in this process are not returned again.
 * A port can still be taken by someone else between this call and the
 * server's own bind; callers should retry a start that fails with
 * "address in use".
 *
 * @param count - how many ports to return
 * @param host - the address to bind, 127.0.0.1 by default
 */
export async function freePorts(count: number, host = "127.0.0.1"): Promise<number[]> {
  const held: Server[] = [];
  const ports: number[] = [];
  try {
    let attempts = 0;
    while (ports.length < count) {
      attempts += 1;
      if (attempts > count * 20) {
        throw new Error(`could not find ${count} free ports on ${host}`);
      }
      const server = await listenOnEphemeralPort(host);
      held.push(server);
      const address = server.address();
      if (address === null || typeof address === "string") {
        continue;
      }
      if (!handedOut.has(address.port)) {
        ports.push(address.port);
      }
    }
  } finally {
    await Promise.all(held.map(closeServer));
  }
  for (const port of ports) {
    handedOut.add(port);
  }
  return ports;
}

/**
 * Finds one free TCP port on `host`; see {@link freePorts}.
 *
 * @param host - the address to bind, 127.0.0.1 by default
 */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  const [port] = await freePorts(1, host);
  if (port === undefined) {
    throw new Error(`could not find a free port on ${host}`);
  }
  return port;
}
