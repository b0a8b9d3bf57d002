import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { touchSession } from "../../src/client-calls.js";
import type { ClientFactory } from "../../src/index.js";

/**
 * Clients that count what the lock recipe does with them: watch notifications delivered
 * (from `exists` and `getChildren` watches) and `getChildren` calls.
 */
export class CountingClients {
  watchNotifications = 0;
  childListings = 0;

  readonly factory: ClientFactory = (request) => {
    const client = zookeeper.createClient(
      request.hosts.map((h) => `${h.host}:${h.port}`).join(","),
      { sessionTimeout: request.sessionTimeoutMs, spinDelay: 100, retries: 0 },
    );
    const wrap = (watcher: unknown) =>
      typeof watcher === "function"
        ? (...args: unknown[]) => {
            this.watchNotifications++;
            (watcher as (...a: unknown[]) => void)(...args);
          }
        : watcher;
    const exists = client.exists.bind(client) as (...args: unknown[]) => void;
    const getChildren = client.getChildren.bind(client) as (...args: unknown[]) => void;
    const patched = client as unknown as Record<string, unknown>;
    patched.exists = (path: string, ...rest: unknown[]) =>
      exists(path, ...(rest.length === 2 ? [wrap(rest[0]), rest[1]] : rest));
    patched.getChildren = (path: string, ...rest: unknown[]) => {
      this.childListings++;
      getChildren(path, ...(rest.length === 2 ? [wrap(rest[0]), rest[1]] : rest));
    };
    return client;
  };
}

/** Creates a connected raw client for inspecting and editing the tree in tests. */
export async function inspector(hosts: string): Promise<Client> {
  const client = zookeeper.createClient(hosts, { sessionTimeout: 10_000, spinDelay: 100 });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("inspector: no connection")), 10_000);
    client.once("connected", () => {
      clearTimeout(timer);
      resolve();
    });
    client.connect();
  });
  return client;
}

/** Children of `path` (empty when it does not exist). */
export function childrenOf(client: Client, path: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    client.getChildren(path, (error, children) => {
      if (
        error &&
        (error as { getCode?: () => number }).getCode?.() === zookeeper.Exception.NO_NODE
      )
        resolve([]);
      else if (error) reject(error);
      else resolve(children);
    });
  });
}

/**
 * Children of `path` once this client has caught up: ZooKeeper serves a read from the member
 * the client is connected to, which may not yet have applied a change another client already
 * saw acknowledged. A write through the leader first (an empty check transaction) brings this
 * client's member up to date with every change committed before it.
 */
export async function currentChildrenOf(client: Client, path: string): Promise<string[]> {
  await touchSession(client);
  return childrenOf(client, path);
}

/** Deletes `path` and everything under it. */
export function removeTree(client: Client, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    (
      client as unknown as { removeRecursive: (p: string, cb: (e: unknown) => void) => void }
    ).removeRecursive(path, (error) => (error ? reject(error) : resolve()));
  });
}

/** Resolves once `check` returns true, polling every 20 ms; rejects after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
