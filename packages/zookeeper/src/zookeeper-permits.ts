/**
 * Semaphores and read-write locks in ZooKeeper: the queue, the admission rule, the tokens and
 * the downgrade. A permit key's queue (see zookeeper-keys.ts) is the children of one
 * persistent parent; one list of them tells every entry's place, permits and limit, so an
 * entry's turn is worked out from that list alone.
 */
import { randomUUID } from "node:crypto";
import {
  type BackendPermitOptions,
  ConfigError,
  type Grant,
  type PermitHolder,
  PermitLimitError,
  SessionLostError,
} from "@baton/core";
import type { Client, Stat } from "node-zookeeper-client";
import { AcquireStop } from "./acquire-stop.js";
import {
  exists,
  getChildren,
  getData,
  replaceWithEphemeralSequential,
  setData,
} from "./client-calls.js";
import {
  czxidToken,
  decodeNodeData,
  decodeWriteToken,
  encodeNodeData,
  encodeWriteToken,
  mzxidToken,
} from "./zookeeper-codec.js";
import {
  isConnectionLoss,
  toBatonError,
  vanishedNode,
  ZK_CODE,
  zkCode,
} from "./zookeeper-errors.js";
import {
  childPath,
  type PermitNode,
  parsePermitNode,
  permitDir,
  permitNodePrefix,
  permitQueueOrder,
  READ_WRITE_PERMITS,
  sequenceText,
  splitPath,
} from "./zookeeper-keys.js";
import type { ZookeeperGrantHandle } from "./zookeeper-session.js";

/** What a permit grant of this backend carries: its entry, and what a downgrade copies. */
export interface ZookeeperPermitHandle extends ZookeeperGrantHandle {
  /** The value published with the grant. */
  readonly value?: string;
}

/**
 * What the permits of a session use of it: its client, its bounded calls, and the node
 * bookkeeping it shares with its locks (lost replies, orphans, held nodes).
 */
export interface ZookeeperPermitCalls {
  /** The session's client. */
  readonly client: Client;
  /** The ensemble members for messages (see `toBatonError`); unknown for a given client. */
  readonly ensemble?: string | undefined;
  /** The owner id stored in every entry. */
  readonly ownerId: string;
  /** The permits root, e.g. `/baton-permits`. */
  readonly root: string;
  /** The data of an entry publishing `value` (the session's node data, as for its locks). */
  nodeData(value: string | undefined): Buffer;
  /** Aborted when the session ends. */
  readonly ended: AbortSignal;
  /** Paths of the nodes the session holds as grants (it renews and frees them). */
  readonly held: Set<string>;
  /** Runs one call, bounded like the session's others; `onAbandoned` gets one given up on. */
  call<T>(
    what: string,
    pending: Promise<T>,
    stop?: AbortSignal,
    onAbandoned?: (late: Promise<T>) => void,
  ): Promise<T>;
  /** Resolves once connected; rejects when `stop` aborts or the session ends. */
  whenConnected(stop?: AbortSignal): Promise<void>;
  /** Creates an attempt's node `prefix` + sequence, finding it again after a lost reply. */
  createNode(
    dir: string,
    attemptId: string,
    prefix: string,
    data: Buffer,
    stop: AcquireStop,
  ): Promise<string>;
  /** The path of attempt `attemptId`'s node in `dir`, if there is one. */
  findAttempt(dir: string, attemptId: string, stop?: AbortSignal): Promise<string | undefined>;
  /** Resolves when `path` no longer exists (or changed). */
  waitGone(path: string, stop: AbortSignal): Promise<void>;
  /** Resolves when `changed` does or `stop` aborts. */
  untilChanged(changed: Promise<void>, stop: AbortSignal): Promise<void>;
  /** Deletes an attempt's own node after a try (an orphan if that fails). */
  deleteOwn(dir: string, attemptId: string, path: string): Promise<void>;
  /** Records a node to delete and starts deleting it; resolves after the first try. */
  orphan(dir: string, attemptId: string, path: string | undefined): Promise<void>;
  /** Deletes what a create given up on made, once it finishes. */
  lateCreate(dir: string, attemptId: string, late: Promise<string>): void;
  /** Whether attempt `attemptId`'s node is an orphan of this session. */
  isOrphan(attemptId: string): boolean;
  /** Deletes this session's orphans in `dir` first, when it has any. */
  cleanOrphansIn(dir: string): Promise<void>;
  /** A write-path round trip: a read sent right after it is not stale. */
  barrier(): Promise<void>;
}

/**
 * The semaphores and read-write locks of a session. Each permit key is a persistent parent
 * (see zookeeper-keys.ts) whose EPHEMERAL_SEQUENTIAL children are its one queue; the parent's
 * data is the key's newest write token. The entries are ephemeral nodes of the session, so
 * its one heartbeat keeps them all and they go within its timeout once it dies.
 */
export class ZookeeperPermits {
  readonly #s: ZookeeperPermitCalls;
  readonly #root: string;

  constructor(calls: ZookeeperPermitCalls) {
    this.#s = calls;
    this.#root = calls.root;
  }

  /**
   * Acquires `options.permits` of permit key `key`: one EPHEMERAL_SEQUENTIAL entry in the
   * key's queue (see zookeeper-keys.ts) whose name carries its permits and limit, granted
   * once the permits of every entry ahead plus its own fit the limit (one list of the
   * children tells). A semaphore's permit takes a token when it is granted, a write its
   * entry's czxid, which it then stores as the key's newest write token (its parent's data);
   * a read carries that token.
   */
  async acquire(key: string, options: BackendPermitOptions): Promise<Grant | null> {
    const { mode, permits, limit } = options;
    checkPermitRequest(options);
    const dir = permitDir(this.#root, key);
    await this.#s.cleanOrphansIn(dir);
    const attemptId = randomUUID();
    let path: string | undefined;
    // As for a lock: the caller's signal is read only once the acquire waits.
    const stop = new AcquireStop(options, this.#s.ended);
    try {
      const data = this.#s.nodeData(options.value);
      const prefix = permitNodePrefix(dir, { attemptId, mode, permits, limit });
      path = await this.#s.createNode(dir, attemptId, prefix, data, stop);
      const token = await this.#awaitPermits(key, dir, path, data, options.wait, stop);
      if (token === null) {
        await this.#s.deleteOwn(dir, attemptId, path);
        return null;
      }
      this.#s.held.add(path);
      const handle: ZookeeperPermitHandle =
        options.value === undefined ? { path } : { path, value: options.value };
      return { key, ownerId: this.#s.ownerId, token, handle };
    } catch (error) {
      // Leave nothing behind: a node that exists, or may exist, is deleted.
      const cleaning = this.#s.orphan(dir, attemptId, path);
      const { signal } = options;
      if (signal.aborted) {
        await cleaning;
        throw signal.reason;
      }
      if (error instanceof PermitLimitError) {
        await cleaning;
        throw error;
      }
      throw toBatonError(error, `zookeeper acquire of permits of "${key}"`, this.#s.ensemble);
    } finally {
      stop.dispose();
    }
  }

  /**
   * Waits until the permits of every entry ahead of ours plus ours fit the limit: resolves
   * the token, or `null` when `wait` is false and they do not. Each round is one list of the
   * children, sent together with what the grant needs, so an uncontended grant takes no
   * round trip of its own:
   *
   * - a semaphore's permit takes its token when it is granted: the zxid of a rewrite of our
   *   node's data (its mzxid), sent with the first list and sent again if it had to wait.
   *   One release can let several permits in, and one created first may notice last: with
   *   its czxid as token it would get a smaller one than a permit granted and released
   *   meanwhile;
   * - a write takes our node's czxid (its stat, with the first list): a write is granted
   *   alone, after every entry ahead is gone, so nothing granted before it is newer. It then
   *   stores the token as the key's newest write token;
   * - a read carries the newest write token, read with the list that admits it: every write
   *   ahead of it is gone by then, and a write stores its token before its grant resolves,
   *   so before it can be released.
   *
   * A waiter watches the nearest entry ahead that blocks it alone (a read the nearest write,
   * a write the entry just ahead); when several holders block it together (a semaphore's),
   * it watches the list of children.
   */
  async #awaitPermits(
    key: string,
    dir: string,
    path: string,
    data: Buffer,
    wait: boolean,
    stop: AcquireStop,
  ): Promise<bigint | null> {
    const own = parsePermitNode(splitPath(path).name);
    if (own === undefined) throw new Error(`zookeeper: unexpected permit node path ${path}`);
    const { mode } = own;
    /** A write's token: our node's czxid, read once. */
    let created: bigint | undefined;
    let first = true;
    let watchChildren = false;
    for (;;) {
      try {
        let wake: (() => void) | undefined;
        const changed = watchChildren
          ? new Promise<void>((resolve) => {
              wake = resolve;
            })
          : undefined;
        const list =
          wake === undefined
            ? getChildren(this.#s.client, dir)
            : getChildren(this.#s.client, dir, wake);
        // Hot path: see docs/hot-path.md, "ZooKeeper".
        const [children, newestWrite, stat] = await this.#s.call(
          "zookeeper list of the permit queue",
          Promise.all([
            list,
            mode === "read" ? getData(this.#s.client, dir) : undefined,
            mode === "permit" && first
              ? setData(this.#s.client, path, data, -1)
              : mode === "write" && created === undefined
                ? exists(this.#s.client, path)
                : undefined,
          ]),
          stop.current,
        );
        if (mode === "write" && created === undefined) {
          if (stat === null || stat === undefined) throw vanishedNode(path);
          created = czxidToken(stat.czxid);
        }
        // Every entry counts except our own orphans.
        const queue = permitQueueOrder(children).filter(
          (n) => n.name === own.name || !this.#s.isOrphan(n.attemptId),
        );
        const turn = permitTurn(queue, own.name, first);
        const firstRound = first;
        first = false;
        if (turn.kind === "vanished") throw vanishedNode(path);
        if (turn.kind === "mismatch") throw new PermitLimitError(key, turn.stored, own.limit);
        if (turn.kind === "granted") {
          if (mode === "read") return decodeWriteToken(newestWrite?.data);
          if (mode === "write") {
            const token = created as bigint;
            await this.#s.call(
              "zookeeper write of the newest write token",
              setData(this.#s.client, dir, encodeWriteToken(token), -1),
              stop.current,
            );
            return token;
          }
          if (firstRound && stat !== null && stat !== undefined) return mzxidToken(stat.mzxid);
          const granted = await this.#s.call(
            "zookeeper token of a granted permit",
            setData(this.#s.client, path, data, -1),
            stop.current,
          );
          return mzxidToken(granted.mzxid);
        }
        if (!wait) return null;
        const waiting = stop.waiting();
        if (turn.blocker !== undefined) {
          watchChildren = false;
          await this.#s.waitGone(childPath(dir, turn.blocker.name), waiting);
        } else if (changed !== undefined) {
          await this.#s.untilChanged(changed, waiting);
          waiting.throwIfAborted();
        } else {
          // List again, this time watching the list.
          watchChildren = true;
        }
      } catch (error) {
        if (!isConnectionLoss(error)) throw error;
        // Our node lives as long as the session: wait for the connection, keep our place.
        await this.#s.whenConnected(stop.waiting());
      }
    }
  }

  /**
   * The entries of permit key `key` that hold their permits, in queue order (the order they
   * were granted), read after a leader round trip (as a lock's holder is read).
   */
  async holders(key: string): Promise<PermitHolder[]> {
    const dir = permitDir(this.#root, key);
    try {
      const barrier = this.#s.barrier();
      barrier.catch(() => undefined);
      const [children, parent] = await this.#s.call(
        "zookeeper list of the permit queue",
        Promise.all([getChildren(this.#s.client, dir), getData(this.#s.client, dir)]),
      );
      await barrier;
      const newestWrite = decodeWriteToken(parent.data);
      const granted = grantedEntries(permitQueueOrder(children));
      const nodes = await this.#s.call(
        "zookeeper read of the permit holders",
        Promise.all(
          granted.map((n) =>
            getData(this.#s.client, childPath(dir, n.name)).catch((error: unknown) => {
              if (zkCode(error) === ZK_CODE.noNode) return undefined;
              throw error;
            }),
          ),
        ),
      );
      const holders: PermitHolder[] = [];
      granted.forEach((entry, i) => {
        const node = nodes[i];
        if (node !== undefined) holders.push(permitHolder(entry, node, newestWrite));
      });
      return holders;
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return [];
      throw toBatonError(
        error,
        `zookeeper read of the permit holders of "${key}"`,
        this.#s.ensemble,
      );
    }
  }

  /**
   * Turns write grant `grant` into a read grant with its token, in one multi: it deletes the
   * write's entry and creates a read entry that keeps the write's place in the queue (its
   * name carries the write's sequence) and stores the write's token. No write behind can
   * come in between (the read is ahead of it from the same transaction on), and the reads
   * waiting behind, which watch the write's entry, are told at once.
   */
  async downgrade(grant: Grant): Promise<Grant | null> {
    const handle = grant.handle as ZookeeperPermitHandle | undefined;
    const path = handle?.path;
    if (path === undefined || !this.#s.held.has(path)) return null;
    const { dir, name } = splitPath(path);
    const own = parsePermitNode(name);
    if (own?.mode !== "write") return null;
    const attemptId = randomUUID();
    const prefix = permitNodePrefix(dir, {
      attemptId,
      mode: "read",
      permits: 1,
      limit: own.limit,
      downgradedFrom: sequenceText(name),
    });
    const value = handle?.value;
    const data = encodeNodeData({ ownerId: this.#s.ownerId, value, token: grant.token });
    const granted = (created: string): Grant => {
      this.#s.held.delete(path);
      this.#s.held.add(created);
      const readHandle: ZookeeperPermitHandle =
        value === undefined ? { path: created } : { path: created, value };
      return { key: grant.key, ownerId: this.#s.ownerId, token: grant.token, handle: readHandle };
    };
    for (;;) {
      try {
        const created = await this.#s.call(
          "zookeeper downgrade of a write",
          replaceWithEphemeralSequential(this.#s.client, path, prefix, data),
          undefined,
          (late) => this.#s.lateCreate(dir, attemptId, late),
        );
        return granted(created);
      } catch (error) {
        const code = zkCode(error);
        if (code === ZK_CODE.noNode) {
          this.#s.held.delete(path);
          return null;
        }
        if (code === ZK_CODE.sessionExpired || error instanceof SessionLostError) return null;
        if (!isConnectionLoss(error)) {
          throw toBatonError(error, `zookeeper downgrade of "${grant.key}"`, this.#s.ensemble);
        }
        // The reply was lost: the multi ran if our read entry exists, did not if the write's
        // still does.
        try {
          await this.#s.call("zookeeper reconnect", this.#s.whenConnected());
          const found = await this.#s.findAttempt(dir, attemptId);
          if (found !== undefined) return granted(found);
          if ((await this.#s.call("zookeeper stat", exists(this.#s.client, path))) === null) {
            this.#s.held.delete(path);
            return null;
          }
        } catch (inner) {
          throw toBatonError(inner, `zookeeper downgrade of "${grant.key}"`, this.#s.ensemble);
        }
      }
    }
  }
}

/** What one list of a permit key's children says about one of its entries. */
export type PermitTurn =
  /** The permits of every entry ahead plus its own fit the limit. */
  | { readonly kind: "granted" }
  /**
   * They do not. `blocker`: the nearest entry ahead without whose permits it can never fit
   * (a write, for a read; the entry just ahead, for a write), whose deletion is the one event
   * to wait for; `undefined` when no single entry ahead blocks it alone (several holders of a
   * semaphore do), and any change of the list may let it in.
   */
  | { readonly kind: "waiting"; readonly blocker: PermitNode | undefined }
  /** An entry ahead was made with another limit: `stored`. */
  | { readonly kind: "mismatch"; readonly stored: number }
  /** The entry is not in the list. */
  | { readonly kind: "vanished" };

/**
 * The turn of entry `ownName` in `queue` (in queue order). With `checkLimit` (the entry's
 * first list, right after its create), an entry ahead of it with another limit is a
 * mismatch.
 *
 * Why the first list suffices: an entry ahead was created before ours, so any entry ahead
 * that is still there when ours is granted was in our first list. Two entries with different
 * limits are therefore never both granted: the later one saw the earlier one and gave up.
 * Entries that arrive later are all behind ours (a downgraded write's read keeps the write's
 * place and limit), so they never change what is ahead of it but by leaving.
 */
export function permitTurn(
  queue: readonly PermitNode[],
  ownName: string,
  checkLimit: boolean,
): PermitTurn {
  const index = queue.findIndex((n) => n.name === ownName);
  if (index < 0) return { kind: "vanished" };
  const own = queue[index] as PermitNode;
  let ahead = 0;
  let blocker: PermitNode | undefined;
  for (let i = 0; i < index; i++) {
    const node = queue[i] as PermitNode;
    if (checkLimit && node.limit !== own.limit) return { kind: "mismatch", stored: node.limit };
    ahead += node.permits;
    if (node.permits + own.permits > own.limit) blocker = node;
  }
  if (ahead + own.permits <= own.limit) return { kind: "granted" };
  return { kind: "waiting", blocker };
}

/**
 * The entries of `queue` (in queue order) that hold their permits: the longest run from the
 * front whose permits fit the limit of the first entry. Entries made with another limit are
 * left out: each of them was created behind an entry with the first's limit that is still
 * there, so it gives up (see {@link permitTurn}).
 */
export function grantedEntries(queue: readonly PermitNode[]): PermitNode[] {
  const first = queue[0];
  if (first === undefined) return [];
  const granted: PermitNode[] = [];
  let held = 0;
  for (const node of queue) {
    if (node.limit !== first.limit) continue;
    if (held + node.permits > first.limit) break;
    held += node.permits;
    granted.push(node);
  }
  return granted;
}

/**
 * A read-write lock's entries stand for their permits (a read 1, a write all): a read or a
 * write asked for with other numbers has no entry to stand for it.
 */
function checkPermitRequest(options: BackendPermitOptions): void {
  const { mode, permits, limit } = options;
  if (permits < 1 || permits > limit) {
    throw new ConfigError("permits", `zookeeper: ${permits} permits of ${limit} cannot be taken`);
  }
  if (mode === "permit") return;
  const expected = mode === "read" ? 1 : READ_WRITE_PERMITS;
  if (limit !== READ_WRITE_PERMITS || permits !== expected) {
    throw new ConfigError(
      "permits",
      `zookeeper: a ${mode} takes ${expected} of ${READ_WRITE_PERMITS} permits, not ${permits} of ${limit}`,
    );
  }
}

/** The holder a granted permit entry stands for, from its node's data and stat. */
export function permitHolder(
  entry: PermitNode,
  node: { data: Buffer; stat: Stat },
  newestWrite: bigint,
): PermitHolder {
  const data = decodeNodeData(node.data);
  // A read carries the newest write's token (a downgraded write's read stores it); a
  // semaphore's permit took the zxid of its grant's rewrite of the node.
  const token =
    entry.mode === "read"
      ? (data?.token ?? newestWrite)
      : entry.mode === "permit"
        ? mzxidToken(node.stat.mzxid)
        : czxidToken(node.stat.czxid);
  const holder: PermitHolder = {
    ownerId: data?.ownerId ?? "",
    token,
    permits: entry.permits,
    mode: entry.mode,
  };
  return data?.value === undefined ? holder : { ...holder, value: data.value };
}
