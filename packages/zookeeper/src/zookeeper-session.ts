import { randomUUID } from "node:crypto";
import {
  type BackendAcquireOptions,
  type BackendPermitOptions,
  type BackendSession,
  BackendUnavailableError,
  boundedCall,
  type ForceReleaseOptions,
  type Grant,
  type Holder,
  type KeepAliveResult,
  type KeyPage,
  type KeyState,
  type ListKeysOptions,
  linkSignals,
  onceAborted,
  type PermitHolder,
  SessionLostError,
  type StoredRecord,
  systemClock,
  type Timer,
} from "@baton/core";
import type { Client, Stat } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { AcquireStop } from "./acquire-stop.js";
import {
  createEphemeralSequential,
  createEphemeralSequentialWithStat,
  exists,
  getChildren,
  getData,
  mkdirp,
  remove,
  touchSession,
  touchSessionChecking,
} from "./client-calls.js";
import { closeClient, dropConnection } from "./client-connection.js";
import type { ZookeeperClientLike } from "./zookeeper-client-like.js";
import { czxidToken, decodeContenderData, encodeNodeData } from "./zookeeper-codec.js";
import {
  ensembleNote,
  isConnectionLoss,
  toBatonError,
  vanishedNode,
  ZK_CODE,
  zkCode,
} from "./zookeeper-errors.js";
import { ZookeeperInspection } from "./zookeeper-inspection.js";
import {
  attemptNamePrefix,
  childPath,
  lockDir,
  lockNodePrefix,
  parseLockNode,
  parsePermitNode,
  permitRoot,
  queueOrder,
  splitPath,
} from "./zookeeper-keys.js";
import { ZookeeperPermits } from "./zookeeper-permits.js";
import { ZookeeperRecords } from "./zookeeper-records.js";

/** What a grant of this backend carries to release exactly its node. */
export interface ZookeeperGrantHandle {
  /** The lock node's full path. */
  readonly path: string;
}

/** A node this session created: its full path, and its czxid when the create returned it. */
interface Created {
  readonly path: string;
  readonly czxid?: Buffer;
}

/** A node this session created and must delete: a cancelled wait, a lost reply, a failed release. */
interface Orphan {
  readonly dir: string;
  readonly attemptId: string;
  path: string | undefined;
}

/** What a session is given by its backend. */
export interface ZookeeperSessionContext {
  /** Path of the node under which lock parents live, e.g. `/baton`. */
  readonly root: string;
  /** Owner id stored in every lock node. */
  readonly ownerId: string;
  /** Whether `close()` ends the client (false for a user-supplied shared client). */
  readonly ownsClient: boolean;
  /** Told once when the session ends (expired or closed), for the backend's bookkeeping. */
  readonly onClose: (session: ZookeeperSession) => void;
  /** The ensemble members for messages, e.g. `zk1:2181, zk2:2181`; unknown for a given client. */
  readonly ensemble?: string | undefined;
}

/**
 * Calls are pending and the session has sent nothing for this long: it sends a read to set a
 * held reply free (see `#prod`).
 */
const PROD_AFTER_MS = 100;

/** How long `close()` waits for the server to confirm the session's end. */
const CLOSE_BOUND_MS = 2_000;

/** The shortest bound on one call, whatever the session timeout. */
const MIN_CALL_MS = 1_000;

/** The shortest bound on a session check (`keepAlive`), otherwise half the session timeout. */
const MIN_SESSION_CHECK_MS = 500;

/** How often a create is retried after ZooKeeper says the lock's parent is missing. */
const PARENT_CREATES = 3;

/**
 * One ZooKeeper session: the client's session is the lease (its negotiated timeout is the
 * TTL, kept alive by the client's own pings), and every lock node is an ephemeral child of it.
 */
export class ZookeeperSession implements BackendSession {
  readonly ownerId: string;
  /** The session timeout the ensemble negotiated. */
  readonly ttlMs: number;
  /** Aborted with a `SessionLostError` when ZooKeeper reports the session expired. */
  readonly lost: AbortSignal;
  /** The client of this session (a node-zookeeper-client `Client`). */
  readonly client: ZookeeperClientLike;
  /** The same client, as node-zookeeper-client types it. */
  readonly #zk: Client;
  readonly #context: ZookeeperSessionContext;
  readonly #lost = new AbortController();
  /** Aborted when the session ends for any reason (expiry or close). */
  readonly #ended = new AbortController();
  /** Paths of the nodes this session holds as grants. */
  readonly #held = new Set<string>();
  readonly #orphans = new Map<string, Orphan>();
  readonly #connectWaiters = new Set<() => void>();
  #cleaning: Promise<void> | undefined;
  readonly #onState: (state: unknown) => void;
  readonly #records: ZookeeperRecords;
  readonly #permits: ZookeeperPermits;
  /** Inspection and forced release, and what a renewal learns of held nodes gone. */
  readonly #inspection: ZookeeperInspection;
  /** The data of a lock node that publishes no value (the client copies it into each request). */
  readonly #plainData: Buffer;
  /** Calls sent and not settled yet. */
  #pending = 0;
  /** When the session last sent a request (a call or a prod), on the monotonic clock. */
  #sentAt = 0;
  /** The one timer that looks for a quiet connection while calls are pending (see `#prod`). */
  #prodTimer: Timer | undefined;
  /** Whether a create may ask for the new node's stat (false once ZooKeeper refused it). */
  #createWithStat = true;

  constructor(client: ZookeeperClientLike, context: ZookeeperSessionContext) {
    this.client = client;
    // ZookeeperClientLike describes node-zookeeper-client's Client by shape.
    this.#zk = client as Client;
    this.#context = context;
    this.ownerId = context.ownerId;
    this.ttlMs = client.getSessionTimeout();
    this.lost = this.#lost.signal;
    // Hot path: see docs/hot-path.md, "ZooKeeper".
    this.#plainData = encodeNodeData({ ownerId: this.ownerId });
    this.#permits = new ZookeeperPermits({
      client: this.#zk,
      ensemble: context.ensemble,
      ownerId: this.ownerId,
      root: permitRoot(context.root),
      nodeData: (value) => this.#nodeData(value),
      ended: this.#ended.signal,
      held: this.#held,
      call: (what, pending, stop, onAbandoned) => this.#call(what, pending, stop, onAbandoned),
      whenConnected: (stop) => this.#whenConnected(stop),
      createNode: async (dir, attemptId, prefix, data, stop) =>
        (await this.#createNode(dir, attemptId, prefix, data, stop, false)).path,
      findAttempt: (dir, attemptId, stop) => this.#findAttempt(dir, attemptId, stop),
      waitGone: (path, stop) => this.#waitGone(path, stop),
      untilChanged: (changed, stop) => this.#untilChanged(changed, stop),
      deleteOwn: (dir, attemptId, path) => this.#deleteOwn(dir, attemptId, path),
      orphan: (dir, attemptId, path) => this.#orphan(dir, attemptId, path),
      lateCreate: (dir, attemptId, late) => this.#lateCreate(dir, attemptId, late),
      isOrphan: (attemptId) => this.#orphans.has(attemptId),
      cleanOrphansIn: (dir) => (this.#orphansIn(dir) ? this.#cleanOrphans() : Promise.resolve()),
      barrier: () => this.#call("zookeeper session check", touchSession(this.#zk)),
    });
    this.#onState = (state) => this.#stateChanged(state);
    client.on("state", this.#onState);
    this.#records = new ZookeeperRecords({
      client: this.#zk,
      lockRoot: context.root,
      ensemble: context.ensemble,
      call: (what, pending) => this.#call(what, pending),
      reconnected: () => this.#call("zookeeper reconnect", this.#whenConnected()),
      barrier: () => this.#call("zookeeper session check", touchSession(this.#zk)),
    });
    this.#inspection = new ZookeeperInspection({
      client: this.#zk,
      root: context.root,
      ensemble: context.ensemble,
      call: (what, pending) => this.#call(what, pending),
      barrier: () => this.#call("zookeeper session check", touchSession(this.#zk)),
    });
  }

  /** Bound on one call: the session timeout (an answer later than that is no answer). */
  get #callMs(): number {
    return Math.max(MIN_CALL_MS, this.ttlMs);
  }

  #stateChanged(state: unknown): void {
    if (state === zookeeper.State.SYNC_CONNECTED) {
      for (const wake of [...this.#connectWaiters]) wake();
      if (this.#orphans.size > 0) void this.#cleanOrphans();
    } else if (state === zookeeper.State.EXPIRED || state === zookeeper.State.AUTH_FAILED) {
      const why =
        state === zookeeper.State.EXPIRED
          ? "the ZooKeeper session expired"
          : "ZooKeeper refused the session's credentials";
      this.#end(new SessionLostError(`${why}${ensembleNote(this.#context.ensemble)}`), true);
    }
  }

  #end(reason: SessionLostError, lost: boolean): void {
    if (this.#ended.signal.aborted) return;
    this.#zk.removeListener("state", this.#onState);
    this.#ended.abort(reason);
    this.#prodTimer?.cancel();
    this.#prodTimer = undefined;
    if (lost) this.#lost.abort(reason);
    for (const wake of [...this.#connectWaiters]) wake();
    this.#held.clear();
    this.#context.onClose(this);
  }

  #assertLive(): void {
    this.#ended.signal.throwIfAborted();
  }

  get #connected(): boolean {
    return this.#zk.getState() === zookeeper.State.SYNC_CONNECTED;
  }

  /** Resolves once the client is connected; rejects when `stop` aborts or the session ends. */
  #whenConnected(stop: AbortSignal = this.#ended.signal): Promise<void> {
    if (this.#connected) return Promise.resolve();
    const ended = this.#ended.signal;
    if (ended.aborted) return Promise.reject(ended.reason);
    if (stop.aborted) return Promise.reject(stop.reason);
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.#connectWaiters.delete(done);
        unsubscribe();
        if (ended.aborted) reject(ended.reason);
        else if (stop.aborted) reject(stop.reason);
        else resolve();
      };
      this.#connectWaiters.add(done);
      const unsubscribe = onceAborted(stop, done);
    });
  }

  /**
   * Runs one call, bounded by `timeoutMs` (default: the session timeout) and by `stop`
   * (default: the session's end). A call given up on still runs: `onAbandoned` gets it.
   */
  #call<T>(
    what: string,
    pending: Promise<T>,
    stop: AbortSignal = this.#ended.signal,
    onAbandoned?: (late: Promise<T>) => void,
    timeoutMs = this.#callMs,
  ): Promise<T> {
    this.#pending += 1;
    this.#sentAt = systemClock.now();
    this.#prodTimer ??= systemClock.setTimer(this.#prod, PROD_AFTER_MS);
    const call = boundedCall(pending, {
      timeoutMs,
      signal: stop,
      what: `${what}${ensembleNote(this.#context.ensemble)}`,
      onAbandoned,
    });
    call.then(this.#settled, this.#settled);
    return call;
  }

  readonly #settled = (): void => {
    this.#pending -= 1;
  };

  /**
   * Measured on ZooKeeper 3.8 with this client: now and then the server holds the reply to the
   * second of two requests in flight until the client sends its next packet (the ping, a third
   * of the session timeout later). Any request sets it free. So while calls are pending, one
   * timer per session checks that the session sent something in the last
   * {@link PROD_AFTER_MS}; when it did not, it sends a cheap read. Busy sessions send requests
   * all the time and never prod; a quiet one sends at most one read per call it made. The raw
   * client shows the same stalls.
   */
  readonly #prod = (): void => {
    this.#prodTimer = undefined;
    if (this.#pending === 0 || this.#ended.signal.aborted) return;
    const quietMs = systemClock.now() - this.#sentAt;
    if (quietMs < PROD_AFTER_MS) {
      // A request left meanwhile: it sets free any reply held before it. Look again once the
      // newest one has waited as long.
      this.#prodTimer = systemClock.setTimer(this.#prod, PROD_AFTER_MS - quietMs);
      return;
    }
    if (!this.#connected) return;
    this.#sentAt = systemClock.now();
    exists(this.#zk, "/").catch(() => undefined);
  };

  #dir(key: string): string {
    return lockDir(this.#context.root, key);
  }

  /**
   * Checks the session at the leader with one multi, which also checks that every node the
   * session holds still exists (up to `MAX_CHECKS_PER_RENEWAL` a renewal, in turn): no round
   * trip more. When one is gone, the same renewal finds which, and reads the revocation node a
   * forced release left for it: those grants are reported `revoked`, with the reason.
   */
  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    if (this.#orphans.size > 0) void this.#cleanOrphans();
    const checked = this.#inspection.toCheck(this.#held);
    let intact: boolean;
    try {
      intact = await this.#call(
        "zookeeper session check",
        checked.length === 0
          ? touchSession(this.#zk).then(() => true)
          : touchSessionChecking(this.#zk, checked),
        undefined,
        undefined,
        Math.max(MIN_SESSION_CHECK_MS, Math.floor(this.ttlMs / 2)),
      );
    } catch (error) {
      const mapped = toBatonError(error, "zookeeper session renewal", this.#context.ensemble);
      if (mapped instanceof SessionLostError) this.#end(mapped, true);
      else if (error instanceof BackendUnavailableError) this.#nudgeReconnect();
      throw mapped;
    }
    if (intact) return undefined;
    let gone: Awaited<ReturnType<ZookeeperInspection["gone"]>>;
    try {
      // Nodes released meanwhile are not held any more: not looked at.
      gone = await this.#inspection.gone(checked.filter((path) => this.#held.has(path)));
    } catch {
      // The session is live; the next renewal checks again.
      return undefined;
    }
    for (const path of gone.paths) this.#held.delete(path);
    const { revoked, lostKeys } = gone;
    if (revoked.length === 0 && lostKeys.length === 0) return undefined;
    return {
      ...(revoked.length === 0 ? {} : { revoked }),
      ...(lostKeys.length === 0 ? {} : { lostKeys }),
    };
  }

  /** One page of a key space's names under the root (see zookeeper-inspection.ts). */
  listKeys(options: ListKeysOptions): Promise<KeyPage> {
    this.#assertLive();
    return this.#inspection.listKeys(options);
  }

  /** A lock or permit key's holders and waiters, or `null` (see zookeeper-inspection.ts). */
  inspectKey(space: "lock" | "permit", key: string): Promise<KeyState | null> {
    this.#assertLive();
    return this.#inspection.inspectKey(space, key);
  }

  /** Frees the grant with `options.token`, held by any session (see zookeeper-inspection.ts). */
  forceRelease(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean> {
    this.#assertLive();
    return this.#inspection.forceRelease(space, key, options);
  }

  /**
   * The client never times out a silent connection (it has no read timeout): a server, or a
   * half-open connect, that stopped answering would hold it forever, and a client that
   * reconnected after its session expired would never hear so. After an unanswered session
   * check, drop the connection: the client reconnects, to another member if this one is gone,
   * as the Java client does after its read timeout.
   */
  #nudgeReconnect(): void {
    if (!this.#ended.signal.aborted) dropConnection(this.#zk);
  }

  /** The data of a node publishing `value`: the owner, and the value when there is one. */
  #nodeData(value: string | undefined): Buffer {
    return value === undefined ? this.#plainData : encodeNodeData({ ownerId: this.ownerId, value });
  }

  async acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    const dir = this.#dir(key);
    if (this.#orphansIn(dir)) await this.#cleanOrphans();
    const attemptId = randomUUID();
    let path: string | undefined;
    // The calls of the first try stop when the session ends; once the acquire waits (its
    // turn, or a connection), they stop when the caller gives up too. The caller's signal is
    // not read before that: a single try may ignore it (the coordinator checks it).
    // Hot path: see docs/hot-path.md, "ZooKeeper".
    const stop = new AcquireStop(options, this.#ended.signal);
    try {
      const data = this.#nodeData(options.value);
      const created = await this.#createNode(
        dir,
        attemptId,
        lockNodePrefix(dir, attemptId),
        data,
        stop,
        true,
      );
      path = created.path;
      const token = await this.#awaitTurn(dir, path, options.wait, stop, created.czxid);
      if (token === null) {
        await this.#deleteOwn(dir, attemptId, path);
        return null;
      }
      this.#held.add(path);
      const handle: ZookeeperGrantHandle = { path };
      return { key, ownerId: this.ownerId, token, handle };
    } catch (error) {
      // Leave nothing behind: a node that exists, or may exist, is deleted.
      const cleaning = this.#orphan(dir, attemptId, path);
      const { signal } = options;
      if (signal.aborted) {
        await cleaning;
        throw signal.reason;
      }
      throw toBatonError(error, `zookeeper acquire of "${key}"`, this.#context.ensemble);
    } finally {
      stop.dispose();
    }
  }

  /**
   * Creates this attempt's node, `prefix` and the sequence; `withStat`: in the same request,
   * the new node's czxid (the lock's token), when the ensemble and the client allow it. When
   * the reply is lost with the connection, the node may exist: once connected again, look for
   * it by the attempt id before creating another (its czxid is then not known).
   */
  async #createNode(
    dir: string,
    attemptId: string,
    prefix: string,
    data: Buffer,
    stop: AcquireStop,
    withStat: boolean,
  ): Promise<Created> {
    for (let round = 0; ; round++) {
      // Hot path: see docs/hot-path.md, "ZooKeeper".
      const asked = withStat && this.#createWithStat;
      try {
        const withCzxid = asked
          ? createEphemeralSequentialWithStat(this.#zk, prefix, data)
          : undefined;
        if (withCzxid !== undefined) {
          const created = await this.#call("zookeeper create", withCzxid, stop.current, (late) =>
            this.#lateCreate(
              dir,
              attemptId,
              late.then((c) => c.path),
            ),
          );
          return { path: created.path, czxid: created.stat.czxid };
        }
        const path = await this.#call(
          "zookeeper create",
          createEphemeralSequential(this.#zk, prefix, data),
          stop.current,
          (late) => this.#lateCreate(dir, attemptId, late),
        );
        return { path };
      } catch (error) {
        if (asked && zkCode(error) === ZK_CODE.unimplemented) {
          // A ZooKeeper older than 3.5: no create that returns the stat. Nothing was created.
          this.#createWithStat = false;
          round--;
          continue;
        }
        if (zkCode(error) === ZK_CODE.noNode && round < PARENT_CREATES) {
          await this.#call(
            "zookeeper create of the lock's parent",
            mkdirp(this.#zk, dir),
            stop.current,
          );
          continue;
        }
        if (!isConnectionLoss(error)) throw error;
        await this.#whenConnected(stop.waiting());
        const found = await this.#findAttempt(dir, attemptId, stop.current);
        if (found !== undefined) return { path: found };
      }
    }
  }

  /** A create we stopped waiting for finished after all: delete what it made. */
  #lateCreate(dir: string, attemptId: string, late: Promise<string>): void {
    late.then(
      (path) => void this.#orphan(dir, attemptId, path),
      (error: unknown) => {
        if (isConnectionLoss(error)) void this.#orphan(dir, attemptId, undefined);
      },
    );
  }

  async #findAttempt(
    dir: string,
    attemptId: string,
    stop?: AbortSignal,
  ): Promise<string | undefined> {
    let children: string[];
    try {
      children = await this.#call("zookeeper list of waiters", getChildren(this.#zk, dir), stop);
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return undefined;
      throw error;
    }
    const mine = attemptNamePrefix(attemptId);
    const name = children.find((c) => c.startsWith(mine));
    return name === undefined ? undefined : childPath(dir, name);
  }

  /**
   * Waits until our node is the lowest: resolves the token (our node's czxid, given by the
   * create or read here), or `null` when `wait` is false and another node is ahead. Watches
   * only the node just ahead of ours.
   */
  async #awaitTurn(
    dir: string,
    path: string,
    wait: boolean,
    stop: AcquireStop,
    czxid: Buffer | undefined,
  ): Promise<bigint | null> {
    const own = parseLockNode(splitPath(path).name);
    if (own === undefined) throw new Error(`zookeeper: unexpected lock node path ${path}`);
    let token = czxid === undefined ? undefined : czxidToken(czxid);
    for (;;) {
      try {
        let children: string[];
        if (token === undefined) {
          // Children and our stat in one round trip (both requests leave in one write), bounded
          // as one call. Hot path: see docs/hot-path.md, "ZooKeeper".
          const [list, stat] = await this.#call(
            "zookeeper list of waiters and stat of our lock node",
            Promise.all([getChildren(this.#zk, dir), exists(this.#zk, path)]),
            stop.current,
          );
          if (stat === null) throw vanishedNode(path);
          token = czxidToken(stat.czxid);
          children = list;
        } else {
          children = await this.#call(
            "zookeeper list of waiters",
            getChildren(this.#zk, dir),
            stop.current,
          );
        }
        // Every contender counts, whatever library made it, except our own orphans.
        const queue = queueOrder(children).filter(
          (n) =>
            n.name === own.name || n.attemptId === undefined || !this.#orphans.has(n.attemptId),
        );
        const index = queue.findIndex((n) => n.name === own.name);
        if (index < 0) throw vanishedNode(path);
        if (index === 0) return token;
        if (!wait) return null;
        const ahead = queue[index - 1] as { name: string };
        await this.#waitGone(childPath(dir, ahead.name), stop.waiting());
      } catch (error) {
        if (!isConnectionLoss(error)) throw error;
        // Our node lives as long as the session: wait for the connection, keep our place.
        await this.#whenConnected(stop.waiting());
      }
    }
  }

  /** Resolves when `path` no longer exists (or changed), watching only that node. */
  #waitGone(path: string, stop: AbortSignal): Promise<void> {
    if (stop.aborted) return Promise.reject(stop.reason);
    return new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (error?: unknown) => {
        if (done) return;
        done = true;
        unsubscribe();
        if (error === undefined) resolve();
        else reject(error);
      };
      const unsubscribe = onceAborted(stop, () => finish(stop.reason));
      exists(this.#zk, path, () => finish()).then(
        (stat) => {
          if (stat === null) finish();
        },
        (error: unknown) => finish(error),
      );
    });
  }

  /** Deletes our own node after a try found the lock held. */
  async #deleteOwn(dir: string, attemptId: string, path: string): Promise<void> {
    try {
      await this.#call("zookeeper delete", remove(this.#zk, path));
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return;
      void this.#orphan(dir, attemptId, path);
    }
  }

  #orphansIn(dir: string): boolean {
    for (const o of this.#orphans.values()) if (o.dir === dir) return true;
    return false;
  }

  /** Records a node to delete and starts deleting it; resolves after the first try. */
  #orphan(dir: string, attemptId: string, path: string | undefined): Promise<void> {
    if (this.#ended.signal.aborted) return Promise.resolve();
    const known = this.#orphans.get(attemptId);
    if (known === undefined) this.#orphans.set(attemptId, { dir, attemptId, path });
    else if (path !== undefined) known.path = path;
    return this.#cleanOrphans();
  }

  /** Deletes every orphan it can; the rest are tried again on reconnect and on keepAlive. */
  #cleanOrphans(): Promise<void> {
    if (this.#cleaning !== undefined) return this.#cleaning.then(() => this.#cleanOrphans());
    if (!this.#connected || this.#ended.signal.aborted) return Promise.resolve();
    const run = async () => {
      await Promise.all(
        [...this.#orphans.values()].map(async (orphan) => {
          try {
            const path = orphan.path ?? (await this.#findAttempt(orphan.dir, orphan.attemptId));
            if (path !== undefined) await this.#call("zookeeper delete", remove(this.#zk, path));
            this.#orphans.delete(orphan.attemptId);
          } catch (error) {
            if (zkCode(error) === ZK_CODE.noNode) this.#orphans.delete(orphan.attemptId);
            // Otherwise it stays listed and is tried again.
          }
        }),
      );
    };
    const cleaning = run().finally(() => {
      this.#cleaning = undefined;
    });
    this.#cleaning = cleaning;
    return cleaning;
  }

  async release(grant: Grant): Promise<boolean> {
    const path = (grant.handle as ZookeeperGrantHandle | undefined)?.path;
    if (path === undefined || !this.#held.delete(path)) return false;
    try {
      await this.#call("zookeeper delete", remove(this.#zk, path));
      return true;
    } catch (error) {
      const code = zkCode(error);
      if (code === ZK_CODE.noNode || code === ZK_CODE.sessionExpired) return false;
      if (error instanceof SessionLostError) return false;
      // Not known to be gone: keep trying to delete it while the session lives.
      const { dir, name } = splitPath(path);
      const attemptId = (parseLockNode(name) ?? parsePermitNode(name))?.attemptId;
      if (attemptId !== undefined) void this.#orphan(dir, attemptId, path);
      throw toBatonError(error, `zookeeper release of "${grant.key}"`, this.#context.ensemble);
    }
  }

  /**
   * The holder of `key`, read after a leader round trip. Its `remainingMs` is never set: the
   * time left before the holder's session expires is not something ZooKeeper tells another
   * client. A lock node records its owning session's id (`ephemeralOwner`), not the session's
   * timeout nor when the server last heard from it; that deadline lives only in the leader's
   * session tracker, which the client protocol does not expose (only the `dump` admin command
   * shows it, off by default and not on the client port). A holder that is alive sends
   * heartbeats, so its session's deadline keeps moving until it stops or is cut off.
   */
  async holder(key: string): Promise<Holder | null> {
    this.#assertLive();
    try {
      // The session check goes through the leader; the server applies every earlier commit
      // before answering it, so the list read right after it (same session, in order) is not
      // stale: a release or grant by another client is seen once it has been acknowledged.
      const barrier = this.#call("zookeeper session check", touchSession(this.#zk));
      barrier.catch(() => undefined);
      const holder = await this.#readHolder(this.#dir(key));
      await barrier;
      return holder;
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return null;
      throw toBatonError(error, `zookeeper holder read of "${key}"`, this.#context.ensemble);
    }
  }

  /**
   * The first contender's owner, token and value (a foreign node's data as its owner, with
   * the library named); `null` when the queue is empty.
   */
  async #readHolder(dir: string, watcher?: () => void, stop?: AbortSignal): Promise<Holder | null> {
    for (;;) {
      const children = await this.#call(
        "zookeeper list of waiters",
        watcher === undefined ? getChildren(this.#zk, dir) : getChildren(this.#zk, dir, watcher),
        stop,
      );
      const first = queueOrder(children)[0];
      if (first === undefined) return null;
      let node: { data: Buffer; stat: Stat };
      try {
        node = await this.#call(
          "zookeeper read of the holder",
          getData(this.#zk, childPath(dir, first.name)),
          stop,
        );
      } catch (error) {
        if (zkCode(error) === ZK_CODE.noNode) continue;
        throw error;
      }
      const data = decodeContenderData(node.data, first.layout);
      const token = czxidToken(node.stat.czxid);
      if (data.foreign !== undefined)
        return { ownerId: data.ownerId, token, foreign: data.foreign };
      return data.value === undefined
        ? { ownerId: data.ownerId, token }
        : { ownerId: data.ownerId, token, value: data.value };
    }
  }

  async *watch(key: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    const dir = this.#dir(key);
    const { signal: stop, dispose } = linkSignals([signal, this.#ended.signal]);
    let last: string | undefined;
    try {
      while (!signal.aborted) {
        this.#assertLive();
        let wake!: () => void;
        const changed = new Promise<void>((resolve) => {
          wake = resolve;
        });
        let holder: Holder | null;
        try {
          holder = await this.#readHolder(dir, () => wake(), stop);
        } catch (error) {
          if (signal.aborted) return;
          if (zkCode(error) === ZK_CODE.noNode) {
            // No parent yet: watch for its creation.
            holder = null;
            try {
              const stat = await this.#call(
                "zookeeper watch of the lock's parent",
                exists(this.#zk, dir, () => wake()),
                stop,
              );
              if (stat !== null) wake();
            } catch (inner) {
              if (signal.aborted) return;
              if (!isConnectionLoss(inner))
                throw toBatonError(inner, `zookeeper watch of "${key}"`, this.#context.ensemble);
              await this.#whenConnected(stop).catch(() => undefined);
              continue;
            }
          } else if (isConnectionLoss(error)) {
            await this.#whenConnected(stop).catch(() => undefined);
            continue;
          } else throw toBatonError(error, `zookeeper watch of "${key}"`, this.#context.ensemble);
        }
        const seen = holder === null ? "" : `${holder.token}`;
        if (seen !== last) {
          last = seen;
          yield holder;
        }
        if (signal.aborted) return;
        await this.#untilChanged(changed, stop);
      }
    } finally {
      dispose();
    }
  }

  /** Resolves when `changed` does or `stop` aborts. */
  #untilChanged(changed: Promise<void>, stop: AbortSignal): Promise<void> {
    if (stop.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const unsubscribe = onceAborted(stop, resolve);
      changed.then(() => {
        unsubscribe();
        resolve();
      });
    });
  }

  /** The durable record `key` (see zookeeper-records.ts), or `null`. */
  async readRecord(key: string): Promise<StoredRecord | null> {
    this.#assertLive();
    return await this.#records.read(key);
  }

  /** Writes record `key` if its version is `expected`; the new version, or `null`. */
  async writeRecord(key: string, value: string, expected: string | null): Promise<string | null> {
    this.#assertLive();
    return await this.#records.write(key, value, expected);
  }

  /** Acquires permits of `key` (see zookeeper-permits.ts). */
  async acquirePermits(key: string, options: BackendPermitOptions): Promise<Grant | null> {
    this.#assertLive();
    return await this.#permits.acquire(key, options);
  }

  /** The granted entries of permit key `key`, in grant order. */
  async permitHolders(key: string): Promise<PermitHolder[]> {
    this.#assertLive();
    return await this.#permits.holders(key);
  }

  /** Turns a write grant into a read grant with its token, in one step. */
  async downgrade(grant: Grant): Promise<Grant | null> {
    this.#assertLive();
    return await this.#permits.downgrade(grant);
  }

  async close(): Promise<void> {
    if (this.#ended.signal.aborted) {
      if (this.#context.ownsClient) closeClient(this.#zk, 0);
      return;
    }
    const held = [...this.#held];
    this.#end(new SessionLostError("the ZooKeeper session was closed"), false);
    if (this.#context.ownsClient) {
      await closeClient(this.#zk, CLOSE_BOUND_MS);
      return;
    }
    // A shared client lives on: delete what this session created.
    const paths = [...this.#orphans.values()].flatMap((o) =>
      o.path === undefined ? [] : [o.path],
    );
    this.#orphans.clear();
    await Promise.allSettled(
      [...held, ...paths].map((path) =>
        boundedCall(remove(this.#zk, path), {
          timeoutMs: CLOSE_BOUND_MS,
          what: "zookeeper delete",
        }),
      ),
    );
  }
}
