/** Promise forms of the node-zookeeper-client calls Baton uses. */
import type { Client, Event, Stat } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";

/** A watcher callback for a ZooKeeper watch (fires once). */
export type Watcher = (event: Event) => void;

/** Creates an EPHEMERAL_SEQUENTIAL node; resolves its full path. */
export function createEphemeralSequential(
  client: Client,
  path: string,
  data: Buffer,
): Promise<string> {
  return new Promise((resolve, reject) => {
    client.create(path, data, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, (error, created) =>
      error ? reject(error) : resolve(created),
    );
  });
}

/** Creates a PERSISTENT node; resolves its full path. */
export function createPersistent(client: Client, path: string, data: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    client.create(path, data, zookeeper.CreateMode.PERSISTENT, (error, created) =>
      error ? reject(error) : resolve(created),
    );
  });
}

/** Sets the data of `path` if its data version is `version`; resolves the new stat. */
export function setData(
  client: Client,
  path: string,
  data: Buffer,
  version: number,
): Promise<Stat> {
  return new Promise((resolve, reject) => {
    client.setData(path, data, version, (error, stat) => (error ? reject(error) : resolve(stat)));
  });
}

/** Creates `path` and its missing ancestors as persistent nodes. */
export function mkdirp(client: Client, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    client.mkdirp(path, (error) => (error ? reject(error) : resolve()));
  });
}

/** Deletes `path` whatever its version. */
export function remove(client: Client, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    client.remove(path, -1, (error) => (error ? reject(error) : resolve()));
  });
}

/** The stat of `path`, or `null` when it does not exist; `watcher` fires on its next change. */
export function exists(client: Client, path: string, watcher?: Watcher): Promise<Stat | null> {
  return new Promise((resolve, reject) => {
    const done = (error: unknown, stat: Stat | null) =>
      error ? reject(error) : resolve(stat ?? null);
    if (watcher === undefined) client.exists(path, done);
    else client.exists(path, watcher, done);
  });
}

/** The children of `path`; `watcher` fires on the next change of the list. */
export function getChildren(client: Client, path: string, watcher?: Watcher): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const done = (error: unknown, children: string[]) =>
      error ? reject(error) : resolve(children ?? []);
    if (watcher === undefined) client.getChildren(path, done);
    else client.getChildren(path, watcher, done);
  });
}

/** Data and stat of `path`. */
export function getData(client: Client, path: string): Promise<{ data: Buffer; stat: Stat }> {
  return new Promise((resolve, reject) => {
    client.getData(path, (error, data, stat) => (error ? reject(error) : resolve({ data, stat })));
  });
}

/**
 * A write-path no-op: a multi with one version check of `/`. It goes through the leader, which
 * refuses it for an expired session, so a success proves the session is live at the leader
 * (a read would be answered by a follower that may have lost the leader).
 */
export function touchSession(client: Client): Promise<void> {
  return new Promise((resolve, reject) => {
    client
      .transaction()
      .check("/", -1)
      .commit((error) => (error ? reject(error) : resolve()));
  });
}

/**
 * In one multi: deletes `path` (whatever its version) and creates the EPHEMERAL_SEQUENTIAL
 * node `prefix`; resolves the created node's full path. Fails as a whole, with the first
 * failing operation's error (`NO_NODE` when `path` is gone).
 */
export function replaceWithEphemeralSequential(
  client: Client,
  path: string,
  prefix: string,
  data: Buffer,
): Promise<string> {
  return new Promise((resolve, reject) => {
    client
      .transaction()
      .remove(path, -1)
      .create(prefix, data, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL)
      .commit((error, results) => {
        if (error) {
          reject(error);
          return;
        }
        const created = (results as { path?: unknown }[] | undefined)?.[1]?.path;
        if (typeof created === "string") resolve(created);
        else reject(new Error(`zookeeper: the multi replacing ${path} returned no created path`));
      });
  });
}

/** The children of `path` and its stat, in one read. */
export function getChildrenAndStat(
  client: Client,
  path: string,
): Promise<{ children: string[]; stat: Stat }> {
  return new Promise((resolve, reject) => {
    client.getChildren(path, (error, children, stat) =>
      error ? reject(error) : resolve({ children: children ?? [], stat }),
    );
  });
}

/**
 * In one multi: creates the PERSISTENT node `path` with `data` and its empty PERSISTENT child
 * `child`, and sets `path`'s data once more, so the node starts at data version 1: a multi
 * of node-zookeeper-client sends a version 0 as -1 ("any version"), so 0 could not be checked
 * in a later multi. Fails as a whole, with the first failing operation's error (`NODE_EXISTS`
 * when `path` exists, `NO_NODE` when its parent is missing).
 */
export function createPersistentWithChild(
  client: Client,
  path: string,
  data: Buffer,
  child: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    client
      .transaction()
      .create(path, data, zookeeper.CreateMode.PERSISTENT)
      .create(`${path}/${child}`, Buffer.alloc(0), zookeeper.CreateMode.PERSISTENT)
      .setData(path, data, -1)
      .commit((error) => (error ? reject(error) : resolve()));
  });
}

/**
 * In one multi: checks that `checked` exists (any version) and sets the data of `path` if its
 * data version is `version` (at least 1: the client sends a 0 as "any version"); resolves
 * `path`'s new stat. Fails as a whole, with the first failing operation's error (`NO_NODE`
 * when `checked` is gone, `BAD_VERSION` when the version differs).
 */
export function setDataIfExists(
  client: Client,
  checked: string,
  path: string,
  data: Buffer,
  version: number,
): Promise<Stat> {
  if (version < 1) return Promise.reject(new Error(`zookeeper: a multi cannot check version 0`));
  return new Promise((resolve, reject) => {
    client
      .transaction()
      .check(checked, -1)
      .setData(path, data, version)
      .commit((error, results) => {
        if (error) {
          reject(error);
          return;
        }
        const stat = (results as { stat?: Stat }[] | undefined)?.[1]?.stat;
        if (stat !== undefined) resolve(stat);
        else reject(new Error(`zookeeper: the multi writing ${path} returned no stat`));
      });
  });
}

/**
 * {@link touchSession} that also checks that each of `paths` exists, in the same multi (one
 * request, one round trip). Resolves `true` when all exist, `false` when one is gone (the
 * multi failed on a check: the leader took it, so the session is live); rejects otherwise.
 */
export function touchSessionChecking(client: Client, paths: readonly string[]): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const transaction = client.transaction().check("/", -1);
    for (const path of paths) transaction.check(path, -1);
    transaction.commit((error) => {
      if (!error) resolve(true);
      else if ((error as { getCode?: () => number }).getCode?.() === zookeeper.Exception.NO_NODE)
        resolve(false);
      else reject(error);
    });
  });
}

/** What a multi that failed on one of its operations tells: that operation's index and code. */
export interface MultiFailure {
  readonly index: number;
  readonly code: number;
}

/**
 * In one multi: deletes each of `removals` if its data version is still the one given, and
 * creates each of `creates` as a PERSISTENT node. Resolves `undefined` when it ran, or the
 * operation that failed (removals first, then creates); rejects when no answer said which
 * (a lost connection).
 */
export function removeAndCreate(
  client: Client,
  removals: readonly { readonly path: string; readonly version: number }[],
  creates: readonly { readonly path: string; readonly data: Buffer }[],
): Promise<MultiFailure | undefined> {
  return new Promise((resolve, reject) => {
    const transaction = client.transaction();
    for (const { path, version } of removals) transaction.remove(path, version);
    for (const { path, data } of creates)
      transaction.create(path, data, zookeeper.CreateMode.PERSISTENT);
    transaction.commit((error, results) => {
      if (!error) {
        resolve(undefined);
        return;
      }
      const list = (results ?? []) as { err?: unknown }[];
      const index = list.findIndex(
        (r) =>
          typeof r.err === "number" &&
          r.err !== zookeeper.Exception.OK &&
          r.err !== RUNTIME_INCONSISTENCY,
      );
      const code = (list[index] as { err?: unknown } | undefined)?.err;
      if (index >= 0 && typeof code === "number") resolve({ index, code });
      else reject(error);
    });
  });
}

/** The code ZooKeeper gives the operations of a failed multi that did not fail themselves. */
const RUNTIME_INCONSISTENCY = -2;

/** ZooKeeper's op code of a create that answers with the new node's stat (3.5 and later). */
const CREATE2_OP = 15;
/** The op code the client decodes the answer as: a read of data and stat has its layout. */
const GET_DATA_OP = 4;
/** The permissions of the world's `anyone` in ZooKeeper's open ACL (all of them). */
const ALL_PERMISSIONS = 31;

/** The client's private connection manager, as far as a create with stat needs it. */
interface RequestQueue {
  queue(
    request: unknown,
    callback: (error: unknown, response?: { payload?: { data?: unknown; stat?: Stat } }) => void,
  ): void;
}

/**
 * A create request, written by hand: create2 (op 15) is a create whose answer adds the new
 * node's stat, which node-zookeeper-client does not offer. Its answer (the path as a
 * length-prefixed string, then the stat) has the layout of a data read's answer, so the
 * client is told it sent a read: it decodes the path as data and the stat as a read's stat.
 */
class CreateWithStatRequest {
  /** What the client reads to decode the answer; it sets `xid` when it sends the request. */
  readonly header = { xid: 0, type: GET_DATA_OP };
  readonly payload = {
    chroot: "",
    setChrootPath(chroot: unknown): void {
      if (typeof chroot === "string") this.chroot = chroot;
    },
  };
  readonly #path: string;
  readonly #data: Buffer;
  readonly #mode: number;

  constructor(path: string, data: Buffer, mode: number) {
    this.#path = path;
    this.#data = data;
    this.#mode = mode;
  }

  /** Length, header (xid, op), path, data, the open ACL (world, anyone, all), flags. */
  toBuffer(): Buffer {
    const path = Buffer.from(`${this.payload.chroot}${this.#path}`);
    const size = 8 + 4 + path.length + 4 + this.#data.length + 4 + 4 + 4 + 5 + 4 + 6 + 4;
    const b = Buffer.allocUnsafe(4 + size);
    let at = b.writeInt32BE(size, 0);
    at = b.writeInt32BE(this.header.xid, at);
    at = b.writeInt32BE(CREATE2_OP, at);
    at = b.writeInt32BE(path.length, at);
    at += path.copy(b, at);
    at = b.writeInt32BE(this.#data.length, at);
    at += this.#data.copy(b, at);
    at = b.writeInt32BE(1, at);
    at = b.writeInt32BE(ALL_PERMISSIONS, at);
    at = b.writeInt32BE(5, at);
    at += b.write("world", at, "latin1");
    at = b.writeInt32BE(6, at);
    at += b.write("anyone", at, "latin1");
    b.writeInt32BE(this.#mode, at);
    return b;
  }
}

/**
 * Creates an EPHEMERAL_SEQUENTIAL node and resolves its full path and its stat, in one
 * request: the stat's czxid is a lock's token, which would otherwise take a second request.
 * `undefined` when the client is not node-zookeeper-client as Baton knows it (the caller then
 * creates and reads the stat in two requests). A ZooKeeper older than 3.5 refuses the request
 * (`UNIMPLEMENTED`).
 */
export function createEphemeralSequentialWithStat(
  client: Client,
  path: string,
  data: Buffer,
): Promise<{ path: string; stat: Stat }> | undefined {
  const manager = (client as unknown as { connectionManager?: Partial<RequestQueue> })
    .connectionManager;
  if (typeof manager?.queue !== "function") return undefined;
  const request = new CreateWithStatRequest(path, data, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL);
  return new Promise((resolve, reject) => {
    (manager as RequestQueue).queue(request, (error, response) => {
      if (error) {
        reject(error);
        return;
      }
      const created = response?.payload?.data;
      const stat = response?.payload?.stat;
      if (!Buffer.isBuffer(created) || stat === undefined) {
        reject(new Error(`zookeeper: the create of ${path} returned no path and stat`));
        return;
      }
      const full = created.toString("utf8");
      const chroot = request.payload.chroot;
      resolve({ path: chroot === "" ? full : full.slice(chroot.length), stat });
    });
  });
}
