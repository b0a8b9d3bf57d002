import { TcpProxy } from "@baton/conformance/faults";
import type { BackendSession } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import type { ClientFactory } from "../../src/index.js";
import { ZookeeperSession } from "../../src/index.js";

/**
 * Gives every session's client its own TCP proxies (one per ensemble member), so a test can
 * cut one session off the ensemble, as a frozen or partitioned holder would be: the server
 * hears nothing more from it and expires it after the session timeout.
 */
export class ProxiedClients {
  readonly #proxies = new Map<Client, TcpProxy[]>();
  /** Every client made, in order. */
  readonly created: Client[] = [];

  /** The factory to pass as the backend's `createClient`. */
  readonly factory: ClientFactory = async (request) => {
    const proxies = await Promise.all(request.hosts.map((h) => TcpProxy.start(h)));
    const client = zookeeper.createClient(proxies.map((p) => `${p.host}:${p.port}`).join(","), {
      sessionTimeout: request.sessionTimeoutMs,
      spinDelay: 100,
      retries: 0,
    });
    this.#proxies.set(client, proxies);
    this.created.push(client);
    return client;
  };

  /** The proxies of a session's client. */
  proxiesOf(session: BackendSession): TcpProxy[] {
    if (!(session instanceof ZookeeperSession)) {
      throw new Error("proxied clients: not a ZooKeeper session");
    }
    const proxies = this.#proxies.get(session.client as Client);
    if (proxies === undefined) throw new Error("proxied clients: this session has no proxies");
    return proxies;
  }

  /** Drops every byte between the session's client and the ensemble (connections stay open). */
  blackhole(session: BackendSession): void {
    for (const proxy of this.proxiesOf(session)) proxy.blackhole();
  }

  /** Lets traffic through again. */
  forward(session: BackendSession): void {
    for (const proxy of this.proxiesOf(session)) proxy.forward();
  }

  /** Drops every byte of every client made so far. */
  blackholeAll(): void {
    for (const proxies of this.#proxies.values()) for (const p of proxies) p.blackhole();
  }

  /** Lets every client's traffic through again. */
  forwardAll(): void {
    for (const proxies of this.#proxies.values()) for (const p of proxies) p.forward();
  }

  /** Closes every proxy. */
  async close(): Promise<void> {
    const all = [...this.#proxies.values()].flat();
    this.#proxies.clear();
    await Promise.allSettled(all.map((p) => p.close()));
  }
}
