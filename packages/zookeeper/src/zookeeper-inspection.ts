import type {
  ForceReleaseOptions,
  InspectedHolder,
  KeyPage,
  KeyState,
  ListKeysOptions,
  RevokedGrant,
} from "@baton/core";
import type { Client, Stat } from "node-zookeeper-client";
import {
  exists,
  getChildren,
  getData,
  type MultiFailure,
  mkdirp,
  remove,
  removeAndCreate,
} from "./client-calls.js";
import {
  czxidToken,
  decodeContenderData,
  decodeNodeData,
  decodeRevocation,
  decodeWriteToken,
  encodeRevocation,
  statTimeMs,
} from "./zookeeper-codec.js";
import { toBatonError, ZK_CODE, zkCode } from "./zookeeper-errors.js";
import {
  childPath,
  decodeLockName,
  lockDir,
  permitDir,
  permitQueueOrder,
  permitRoot,
  queueOrder,
  recordRoot,
  revocationPath,
  revocationRoot,
  splitPath,
} from "./zookeeper-keys.js";
import { grantedEntries, permitHolder } from "./zookeeper-permits.js";

/** What {@link ZookeeperInspection} needs from its session. */
export interface ZookeeperInspectionContext {
  readonly client: Client;
  /** The locks root, e.g. `/baton`. */
  readonly root: string;
  readonly ensemble: string | undefined;
  /** Runs one call bounded as the session bounds its calls. */
  readonly call: <T>(what: string, pending: Promise<T>) => Promise<T>;
  /** A leader round trip: reads after it see every write acknowledged before it. */
  readonly barrier: () => Promise<void>;
}

/** The most contenders of one key whose data an inspection reads. */
const INSPECT_LIMIT = 1_000;

/**
 * The most held nodes one renewal checks. Each is one check operation in the renewal's multi
 * (about a hundred bytes); a session holding more checks them in turn, this many a renewal.
 */
export const MAX_CHECKS_PER_RENEWAL = 256;

/**
 * How long a revocation node is kept: a live holder reads its own within one renewal and
 * deletes it; one whose session ended never will, and a later forced release deletes it once
 * it is this old (by the ensemble's clock).
 */
const REVOCATION_KEEP_MS = 10 * 60_000;

/** What the session's renewal learned of the held nodes that are gone. */
export interface GoneGrants {
  /** Gone with a revocation node: force-released, with the reason. */
  readonly revoked: RevokedGrant[];
  /** Lock keys whose node is gone without one (deleted by hand). */
  readonly lostKeys: string[];
  /** Every held path found gone. */
  readonly paths: string[];
}

/**
 * Inspection and forced release for operators, on any ZooKeeper session.
 *
 * - Listing reads the children of the key space's root (the locks root, `-permits` or
 *   `-records` beside it) and pages them client-side: every page lists that root's children
 *   again (ZooKeeper lists a node's children whole), sorted by name, from the cursor (the
 *   last name of the previous page). For locks and permit keys, one pipelined stat per name
 *   of the page leaves out the parents with no contender left.
 * - A lock's inspection lists its parent's children after a leader round trip (as `holder()`
 *   does) and reads the contenders' data: the lowest is the holder (owner and value from its
 *   data, token its czxid, `foreign` for a Curator or kazoo node, `heldMs` from its ctime),
 *   the others wait, in sequence order. ZooKeeper does not tell another client when a session
 *   expires: no `remainingMs`.
 * - A forced release deletes the holder's node, checked by its data version after reading
 *   its czxid (a later grant is never freed), and creates a revocation node with the reason,
 *   in one multi. The next contender's watch on it fires as for a release. The holder's
 *   renewal checks its held nodes in its own multi and reads the revocation node of one gone.
 */
export class ZookeeperInspection {
  readonly #c: ZookeeperInspectionContext;
  readonly #revocations: string;
  readonly #permits: string;
  /** Where the next renewal starts checking the held nodes (see `MAX_CHECKS_PER_RENEWAL`). */
  #checkFrom = 0;

  constructor(context: ZookeeperInspectionContext) {
    this.#c = context;
    this.#revocations = revocationRoot(context.root);
    this.#permits = permitRoot(context.root);
  }

  /** One page of the key space's names (see `BackendSession.listKeys`). */
  async listKeys(options: ListKeysOptions): Promise<KeyPage> {
    const { space, prefix, cursor, limit, signal } = options;
    const root =
      space === "lock"
        ? this.#c.root
        : space === "permit"
          ? this.#permits
          : recordRoot(this.#c.root);
    signal.throwIfAborted();
    let children: string[];
    try {
      children = await this.#c.call(
        `zookeeper list of the ${space} keys`,
        getChildren(this.#c.client, root),
      );
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return { keys: [] };
      throw toBatonError(error, `zookeeper list of the ${space} keys`, this.#c.ensemble);
    }
    const names: { name: string; child: string }[] = [];
    for (const child of children) {
      const name = decodeLockName(child);
      if (name === undefined || !name.startsWith(prefix)) continue;
      if (cursor !== undefined && name <= cursor) continue;
      names.push({ name, child });
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const page = names.slice(0, limit);
    const next = names.length > limit ? page.at(-1)?.name : undefined;
    if (space === "record" || page.length === 0) {
      return { keys: page.map((n) => n.name), ...(next === undefined ? {} : { cursor: next }) };
    }
    signal.throwIfAborted();
    const stats = await this.#c.call(
      `zookeeper stat of the ${space} keys`,
      Promise.all(
        page.map((n) => exists(this.#c.client, childPath(root, n.child)).catch(() => null)),
      ),
    );
    // A parent with no contender left is not listed (ZooKeeper keeps the parents).
    const keys = page.filter((_, i) => (stats[i]?.numChildren ?? 0) > 0).map((n) => n.name);
    return { keys, ...(next === undefined ? {} : { cursor: next }) };
  }

  /** One lock or permit key's holders and waiters (see `BackendSession.inspectKey`). */
  async inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    try {
      const barrier = this.#c.barrier();
      barrier.catch(() => undefined);
      const state =
        space === "lock" ? await this.#inspectLock(key) : await this.#inspectPermits(key);
      await barrier;
      return state;
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return null;
      throw toBatonError(error, `zookeeper inspection of "${key}"`, this.#c.ensemble);
    }
  }

  async #inspectLock(key: string): Promise<KeyState | null> {
    const dir = lockDir(this.#c.root, key);
    const children = await this.#c.call(
      "zookeeper list of waiters",
      getChildren(this.#c.client, dir),
    );
    const queue = queueOrder(children);
    const nodes = await this.#readAll(dir, queue.slice(0, INSPECT_LIMIT));
    const present = queue.flatMap((entry, i) => {
      const node = nodes[i];
      return node === undefined ? [] : [{ entry, node }];
    });
    const first = present[0];
    if (first === undefined) return null;
    const data = decodeContenderData(first.node.data, first.entry.layout);
    const holder: InspectedHolder = {
      ownerId: data.ownerId,
      token: czxidToken(first.node.stat.czxid),
      ...(data.value === undefined ? {} : { value: data.value }),
      ...(data.foreign === undefined ? {} : { foreign: data.foreign }),
      heldMs: heldSince(first.node.stat.ctime),
    };
    const ownerIds = present
      .slice(1)
      .map(({ entry, node }) => decodeContenderData(node.data, entry.layout).ownerId);
    const unread = Math.max(0, queue.length - INSPECT_LIMIT);
    return {
      holders: [holder],
      waiters:
        unread === 0 ? { count: ownerIds.length, ownerIds } : { count: ownerIds.length + unread },
    };
  }

  async #inspectPermits(key: string): Promise<KeyState | null> {
    const dir = permitDir(this.#permits, key);
    const [children, parent] = await this.#c.call(
      "zookeeper list of the permit queue",
      Promise.all([getChildren(this.#c.client, dir), getData(this.#c.client, dir)]),
    );
    const queue = permitQueueOrder(children).slice(0, INSPECT_LIMIT);
    const first = queue[0];
    if (first === undefined) return null;
    const newestWrite = decodeWriteToken(parent.data);
    const granted = new Set(grantedEntries(queue).map((n) => n.name));
    const nodes = await this.#readAll(dir, queue);
    const holders: InspectedHolder[] = [];
    const ownerIds: string[] = [];
    queue.forEach((entry, i) => {
      const node = nodes[i];
      if (node === undefined) return;
      if (!granted.has(entry.name)) {
        ownerIds.push(decodeNodeData(node.data)?.ownerId ?? "");
        return;
      }
      // A semaphore's permit granted after waiting rewrote its node: its mtime is the grant's.
      const since = entry.mode === "permit" ? node.stat.mtime : node.stat.ctime;
      holders.push({ ...permitHolder(entry, node, newestWrite), heldMs: heldSince(since) });
    });
    if (holders.length === 0 && ownerIds.length === 0) return null;
    return { holders, waiters: { count: ownerIds.length, ownerIds }, limit: first.limit };
  }

  /** The data and stat of each contender (undefined for one gone since the list), in one round trip. */
  #readAll(
    dir: string,
    entries: readonly { readonly name: string }[],
  ): Promise<({ data: Buffer; stat: Stat } | undefined)[]> {
    return this.#c.call(
      "zookeeper read of the contenders",
      Promise.all(
        entries.map((n) =>
          getData(this.#c.client, childPath(dir, n.name)).catch((error: unknown) => {
            if (zkCode(error) === ZK_CODE.noNode) return undefined;
            throw error;
          }),
        ),
      ),
    );
  }

  /**
   * Frees the grant of `key` with token `options.token` (see `BackendSession.forceRelease`):
   * resolves `false` when no such grant holds it.
   */
  async forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    options.signal.throwIfAborted();
    try {
      const targets =
        space === "lock"
          ? await this.#lockTarget(key, options.token)
          : await this.#permitTargets(key, options.token);
      if (targets.length === 0) return false;
      options.signal.throwIfAborted();
      return await this.#revoke(space, key, targets, options);
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return false;
      throw toBatonError(error, `zookeeper forced release of "${key}"`, this.#c.ensemble);
    }
  }

  /** The holder's node of lock `key` when its token is `token`. */
  async #lockTarget(key: string, token: bigint): Promise<Target[]> {
    const dir = lockDir(this.#c.root, key);
    const children = await this.#c.call(
      "zookeeper list of waiters",
      getChildren(this.#c.client, dir),
    );
    const first = queueOrder(children)[0];
    if (first === undefined) return [];
    const path = childPath(dir, first.name);
    const node = await this.#c.call("zookeeper read of the holder", getData(this.#c.client, path));
    if (czxidToken(node.stat.czxid) !== token) return [];
    // A Curator or kazoo holder reads no revocation node: none is written for it.
    const foreign = decodeContenderData(node.data, first.layout).foreign !== undefined;
    return [{ path, version: node.stat.version, tell: !foreign }];
  }

  /** The granted entries of permit key `key` whose token is `token` (reads may share one). */
  async #permitTargets(key: string, token: bigint): Promise<Target[]> {
    const dir = permitDir(this.#permits, key);
    const [children, parent] = await this.#c.call(
      "zookeeper list of the permit queue",
      Promise.all([getChildren(this.#c.client, dir), getData(this.#c.client, dir)]),
    );
    const granted = grantedEntries(permitQueueOrder(children));
    const nodes = await this.#readAll(dir, granted);
    const newestWrite = decodeWriteToken(parent.data);
    return granted.flatMap((entry, i) => {
      const node = nodes[i];
      if (node === undefined || permitHolder(entry, node, newestWrite).token !== token) return [];
      return [{ path: childPath(dir, entry.name), version: node.stat.version, tell: true }];
    });
  }

  /**
   * One multi: deletes each target node while its data version is the one read, and creates
   * its revocation node. The revocation root is created on first use.
   */
  async #revoke(
    space: "lock" | "permit",
    key: string,
    targets: readonly Target[],
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    const data = encodeRevocation({ space, key, token: options.token, reason: options.reason });
    const creates = targets
      .filter((t) => t.tell)
      .map((t) => ({ path: revocationPath(this.#revocations, t.path), data }));
    for (let attempt = 0; ; attempt++) {
      const failed: MultiFailure | undefined = await this.#c.call(
        "zookeeper forced release",
        removeAndCreate(this.#c.client, targets, creates),
      );
      if (failed === undefined) break;
      // A node is gone or changed: that grant ended meanwhile.
      if (failed.index < targets.length) return false;
      if (failed.code !== ZK_CODE.noNode || attempt > 0) return false;
      await this.#c.call(
        "zookeeper create of the revocation root",
        mkdirp(this.#c.client, this.#revocations),
      );
    }
    void this.#sweep().catch(() => undefined);
    return true;
  }

  /** Deletes the revocation nodes older than `REVOCATION_KEEP_MS` (nobody will read them). */
  async #sweep(): Promise<void> {
    const children = await this.#c.call(
      "zookeeper list of revocations",
      getChildren(this.#c.client, this.#revocations),
    );
    const stats = await this.#c.call(
      "zookeeper stat of revocations",
      Promise.all(children.map((c) => exists(this.#c.client, childPath(this.#revocations, c)))),
    );
    const newest = Math.max(0, ...stats.map((s) => (s === null ? 0 : statTimeMs(s.ctime))));
    await Promise.allSettled(
      children.map((child, i) => {
        const stat = stats[i];
        if (stat === null || stat === undefined) return undefined;
        if (newest - statTimeMs(stat.ctime) < REVOCATION_KEEP_MS) return undefined;
        return remove(this.#c.client, childPath(this.#revocations, child));
      }),
    );
  }

  /**
   * The held nodes the next renewal checks: all of them, or `MAX_CHECKS_PER_RENEWAL` in turn.
   */
  toCheck(held: ReadonlySet<string>): string[] {
    if (held.size <= MAX_CHECKS_PER_RENEWAL) return [...held];
    const all = [...held];
    const from = this.#checkFrom % all.length;
    this.#checkFrom = from + MAX_CHECKS_PER_RENEWAL;
    const batch = all.slice(from, from + MAX_CHECKS_PER_RENEWAL);
    return batch.length < MAX_CHECKS_PER_RENEWAL
      ? [...batch, ...all.slice(0, MAX_CHECKS_PER_RENEWAL - batch.length)]
      : batch;
  }

  /**
   * After a renewal's check found a held node gone: which of `checked` are gone (one pipelined
   * stat each), and for each its revocation node (read, then deleted in the background).
   */
  async gone(checked: readonly string[]): Promise<GoneGrants> {
    const stats = await this.#c.call(
      "zookeeper stat of the held nodes",
      Promise.all(checked.map((path) => exists(this.#c.client, path))),
    );
    const paths = checked.filter((_, i) => stats[i] === null);
    const told = await this.#c.call(
      "zookeeper read of revocations",
      Promise.all(
        paths.map((path) =>
          getData(this.#c.client, revocationPath(this.#revocations, path)).catch(
            (error: unknown) => {
              if (zkCode(error) === ZK_CODE.noNode) return undefined;
              throw error;
            },
          ),
        ),
      ),
    );
    const revoked: RevokedGrant[] = [];
    const lostKeys: string[] = [];
    paths.forEach((path, i) => {
      const revocation = decodeRevocation(told[i]?.data);
      if (revocation !== undefined) {
        revoked.push(revocation);
        void remove(this.#c.client, revocationPath(this.#revocations, path)).catch(() => undefined);
        return;
      }
      const { dir } = splitPath(path);
      const parent = splitPath(dir);
      const key = decodeLockName(parent.name);
      if (parent.dir === this.#c.root && key !== undefined) lostKeys.push(key);
    });
    return { revoked, lostKeys, paths };
  }
}

/** A node a forced release deletes: its path, its data version as read, and whether to tell. */
interface Target {
  readonly path: string;
  readonly version: number;
  readonly tell: boolean;
}

/** Milliseconds since `time` (a stat's, by the ensemble's clock), by this process's clock. */
function heldSince(time: Buffer): number {
  return Math.max(0, Date.now() - statTimeMs(time));
}
