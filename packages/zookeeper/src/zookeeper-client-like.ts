/**
 * What Baton needs of a ZooKeeper client an application passes it (`client`, or what
 * `createClient` returns), described by shape: the published declarations never import
 * node-zookeeper-client's own types, so a release of it or of `@types/node-zookeeper-client`
 * with broken declarations cannot break an application's strict build. A node-zookeeper-client
 * `Client` (`zookeeper.createClient(...)`) has every member listed, and is what Baton expects:
 * it calls the node operations with that client's own arguments and callbacks, and reads its
 * connection state.
 */
export interface ZookeeperClientLike {
  /** Starts connecting (Baton calls it for a client that has not started). */
  connect(): void;
  /** Closes the session: the ensemble deletes its ephemeral nodes. */
  close(): void;
  /** The session timeout the ensemble granted, ms. */
  getSessionTimeout(): number;
  /** The connection state (one of node-zookeeper-client's `State` values). */
  getState(): unknown;
  /** Adds a listener of a client event (`state`, `connected`, `expired`, ...). */
  on(event: string, listener: ClientListener): unknown;
  /** Adds a listener called once. */
  once(event: string, listener: ClientListener): unknown;
  /** Removes a listener. */
  removeListener(event: string, listener: ClientListener): unknown;
  /** Creates a node (path, data, ACLs, mode, callback). */
  create(path: string, ...rest: never[]): unknown;
  /** Creates a node and its missing parents. */
  mkdirp(path: string, ...rest: never[]): unknown;
  /** Deletes a node. */
  remove(path: string, ...rest: never[]): unknown;
  /** Reads whether a node exists, optionally watching it. */
  exists(path: string, ...rest: never[]): unknown;
  /** Lists a node's children, optionally watching them. */
  getChildren(path: string, ...rest: never[]): unknown;
  /** Reads a node's data. */
  getData(path: string, ...rest: never[]): unknown;
  /** Writes a node's data. */
  setData(path: string, ...rest: never[]): unknown;
  /** Starts a multi-operation transaction. */
  transaction(): unknown;
}

/** A listener of a client event; its arguments depend on the event. */
// biome-ignore lint/suspicious/noExplicitAny: each event passes its own arguments, as EventEmitter types them
export type ClientListener = (...args: any[]) => void;
