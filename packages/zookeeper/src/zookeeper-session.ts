import { randomUUID } from "node:crypto";
import {
  type BackendAcquireOptions,
  type BackendSession,
  BackendUnavailableError,
  type Grant,
  type Holder,
  type KeepAliveResult,
  SessionLostError,
} from "@baton/core";
import type { Client, Stat } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";
import { Interrupt } from "./interrupt.js";
import {
  czxidToken,
  decodeNodeData,
  encodeLockName,
  encodeNodeData,
  nodePrefix,
  parseNode,
  queueOrder,
} from "./lock-node.js";
import { bounded, type LateOutcome } from "./settle-bounded.js";
import {
  createEphemeralSequential,
  exists,
  getChildren,
  getData,
  mkdirp,
  remove,
  touchSession,
} from "./zk-calls.js";
import { isConnectionLoss, toBatonError, ZK_CODE, zkCode } from "./zk-errors.js";

/** What a grant of this backend carries to release exactly its node. */
interface NodeHandle {
  readonly path: string;
}

/** A node this session created and must delete: a cancelled wait, a lost reply, a failed release. */
interface Orphan {
  readonly dir: string;
  readonly attemptId: string;
  path: string | undefined;
}

/** Settings of one session, fixed by the backend. */
export interface ZookeeperSessionSettings {
  /** Path of the node under which lock parents live, e.g. `/baton`. */
  readonly root: string;
  /** Owner id stored in every lock node. */
  readonly ownerId: string;
  /** Whether `close()` ends the client (false for a user-supplied shared client). */
  readonly ownsClient: boolean;
  /** Told once when the session ends, for the backend's bookkeeping. */
  readonly onEnd: (session: ZookeeperSession) => void;
}

/** A call unanswered this long sends a read to set a held reply free (see `#prod`). */
const PROD_AFTER_MS = 100;

/** How long `close()` waits for the server to confirm the session's end. */
const CLOSE_BOUND_MS = 2_000;

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
  /** The node-zookeeper-client of this session. */
  readonly client: Client;
  readonly #settings: ZookeeperSessionSettings;
  readonly #lost = new AbortController();
  /** Fires when the session ends for any reason (expiry or close). */
  readonly #ended = new Interrupt();
  /** Paths of the nodes this session holds as grants. */
  readonly #held = new Set<string>();
  readonly #orphans = new Map<string, Orphan>();
  readonly #connectWaiters = new Set<() => void>();
  #cleaning: Promise<void> | undefined;
  readonly #onState: (state: unknown) => void;

  constructor(client: Client, settings: ZookeeperSessionSettings) {
    this.client = client;
    this.#settings = settings;
    this.ownerId = settings.ownerId;
    this.ttlMs = client.getSessionTimeout();
    this.lost = this.#lost.signal;
    this.#onState = (state) => this.#stateChanged(state);
    client.on("state", this.#onState);
  }

  /** Bound on one call: the session timeout (an answer later than that is no answer). */
  get #callMs(): number {
    return Math.max(1_000, this.ttlMs);
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
      this.#end(new SessionLostError(why), true);
    }
  }

  #end(reason: SessionLostError, lost: boolean): void {
    if (this.#ended.fired) return;
    this.client.removeListener("state", this.#onState);
    this.#ended.fire(reason);
    if (lost) this.#lost.abort(reason);
    for (const wake of [...this.#connectWaiters]) wake();
    this.#held.clear();
    this.#settings.onEnd(this);
  }

  #assertLive(): void {
    if (this.#ended.fired) throw this.#ended.reason;
  }

  get #connected(): boolean {
    return this.client.getState() === zookeeper.State.SYNC_CONNECTED;
  }

  /** Resolves once the client is connected; rejects when `stop` fires or the session ends. */
  #whenConnected(stop: Interrupt = this.#ended): Promise<void> {
    if (this.#connected) return Promise.resolve();
    if (this.#ended.fired) return Promise.reject(this.#ended.reason);
    if (stop.fired) return Promise.reject(stop.reason);
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.#connectWaiters.delete(done);
        unsubscribe();
        if (this.#ended.fired) reject(this.#ended.reason);
        else if (stop.fired) reject(stop.reason);
        else resolve();
      };
      this.#connectWaiters.add(done);
      const unsubscribe = stop.subscribe(done);
    });
  }

  /** Runs one call, bounded by the session timeout, `stop` and the session's end. */
  #call<T>(
    what: string,
    pending: Promise<T>,
    stop: Interrupt = this.#ended,
    onLate?: (outcome: LateOutcome<T>) => void,
    timeoutMs = this.#callMs,
  ): Promise<T> {
    return bounded(pending, what, {
      timeoutMs,
      interrupt: stop,
      slowMs: PROD_AFTER_MS,
      onSlow: this.#prod,
      ...(onLate === undefined ? {} : { onLate }),
    });
  }

  /**
   * Measured on ZooKeeper 3.8 with this client: now and then the server holds the reply to the
   * second of two requests in flight until the client sends its next packet (the ping, a third
   * of the session timeout later). Any request sets it free, so a call still unanswered after
   * {@link PROD_AFTER_MS} sends a cheap read. The raw client shows the same stalls.
   */
  readonly #prod = (): void => {
    if (this.#ended.fired || !this.#connected) return;
    exists(this.client, "/").catch(() => undefined);
  };

  #dir(key: string): string {
    return `${this.#settings.root}/${encodeLockName(key)}`;
  }

  async keepAlive(): Promise<KeepAliveResult | undefined> {
    this.#assertLive();
    if (this.#orphans.size > 0) void this.#cleanOrphans();
    try {
      await this.#call(
        "a session check",
        touchSession(this.client),
        undefined,
        undefined,
        Math.max(500, Math.floor(this.ttlMs / 2)),
      );
    } catch (error) {
      const mapped = toBatonError(error, "renewing the session");
      if (mapped instanceof SessionLostError) this.#end(mapped, true);
      else if (error instanceof BackendUnavailableError) this.#nudgeReconnect();
      throw mapped;
    }
    return undefined;
  }

  /**
   * The client never times out a silent connection (it has no read timeout): a server, or a
   * half-open connect, that stopped answering would hold it forever, and a client that
   * reconnected after its session expired would never hear so. After an unanswered session
   * check, drop the connection: the client reconnects, to another member if this one is gone,
   * as the Java client does after its read timeout.
   */
  #nudgeReconnect(): void {
    const manager = (
      this.client as unknown as { connectionManager?: { socket?: unknown; state?: unknown } }
    ).connectionManager;
    const socket = manager?.socket as { destroy?: () => void } | undefined;
    // The connection manager's CONNECTING (1) and CONNECTED (2); never while closing.
    const live = manager?.state === 1 || manager?.state === 2;
    if (live && !this.#ended.fired && typeof socket?.destroy === "function") {
      socket.destroy();
    }
  }

  async acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null> {
    this.#assertLive();
    const { signal } = options;
    signal.throwIfAborted();
    const dir = this.#dir(key);
    if (this.#orphansIn(dir)) await this.#cleanOrphans();
    const attemptId = randomUUID();
    let path: string | undefined;
    const { interrupt: stop, dispose } = Interrupt.of(signal, this.#ended);
    try {
      const data = encodeNodeData(
        options.value === undefined
          ? { ownerId: this.ownerId }
          : { ownerId: this.ownerId, value: options.value },
      );
      path = await this.#createNode(dir, attemptId, data, stop);
      const token = await this.#awaitTurn(dir, path, options.wait, stop);
      if (token === null) {
        await this.#deleteOwn(dir, attemptId, path);
        return null;
      }
      this.#held.add(path);
      const handle: NodeHandle = { path };
      return { key, ownerId: this.ownerId, token, handle };
    } catch (error) {
      // Leave nothing behind: a node that exists, or may exist, is deleted.
      const cleaning = this.#orphan(dir, attemptId, path);
      if (signal.aborted) {
        await cleaning;
        throw signal.reason;
      }
      throw toBatonError(error, `acquiring "${key}"`);
    } finally {
      dispose();
    }
  }

  /**
   * Creates this attempt's node. When the reply is lost with the connection, the node may
   * exist: once connected again, look for it by the attempt id before creating another.
   */
  async #createNode(
    dir: string,
    attemptId: string,
    data: Buffer,
    stop: Interrupt,
  ): Promise<string> {
    const prefix = `${dir}/${nodePrefix(attemptId)}`;
    for (let round = 0; ; round++) {
      try {
        return await this.#call(
          "a create",
          createEphemeralSequential(this.client, prefix, data),
          stop,
          (late) => this.#lateCreate(dir, attemptId, late),
        );
      } catch (error) {
        if (zkCode(error) === ZK_CODE.noNode && round < 3) {
          await this.#call("a create of the lock's parent", mkdirp(this.client, dir), stop);
          continue;
        }
        if (!isConnectionLoss(error)) throw error;
        await this.#whenConnected(stop);
        const found = await this.#findAttempt(dir, attemptId, stop);
        if (found !== undefined) return found;
      }
    }
  }

  /** A create we stopped waiting for finished after all: delete what it made. */
  #lateCreate(dir: string, attemptId: string, late: LateOutcome<string>): void {
    if (late.ok) void this.#orphan(dir, attemptId, late.value);
    else if (isConnectionLoss(late.error)) void this.#orphan(dir, attemptId, undefined);
  }

  async #findAttempt(
    dir: string,
    attemptId: string,
    stop?: Interrupt,
  ): Promise<string | undefined> {
    let children: string[];
    try {
      children = await this.#call("a list of waiters", getChildren(this.client, dir), stop);
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return undefined;
      throw error;
    }
    const node = queueOrder(children).find((n) => n.attemptId === attemptId);
    return node === undefined ? undefined : `${dir}/${node.name}`;
  }

  /**
   * Waits until our node is the lowest: resolves the token (our node's czxid), or `null` when
   * `wait` is false and another node is ahead. Watches only the node just ahead of ours.
   */
  async #awaitTurn(
    dir: string,
    path: string,
    wait: boolean,
    stop: Interrupt,
  ): Promise<bigint | null> {
    const own = parseNode(path.slice(dir.length + 1));
    if (own === undefined) throw new Error(`zookeeper: unexpected lock node path ${path}`);
    let token: bigint | undefined;
    for (;;) {
      try {
        let children: string[];
        if (token === undefined) {
          // Children and our stat in one round trip (both requests leave in one write).
          const [list, stat] = await Promise.all([
            this.#call("a list of waiters", getChildren(this.client, dir), stop),
            this.#call("a stat of our lock node", exists(this.client, path), stop),
          ]);
          if (stat === null) throw vanished(path);
          token = czxidToken(stat.czxid);
          children = list;
        } else {
          children = await this.#call("a list of waiters", getChildren(this.client, dir), stop);
        }
        const queue = queueOrder(children).filter(
          (n) => n.name === own.name || !this.#orphans.has(n.attemptId),
        );
        const index = queue.findIndex((n) => n.name === own.name);
        if (index < 0) throw vanished(path);
        if (index === 0) return token;
        if (!wait) return null;
        const ahead = queue[index - 1] as { name: string };
        await this.#waitGone(`${dir}/${ahead.name}`, stop);
      } catch (error) {
        if (!isConnectionLoss(error)) throw error;
        // Our node lives as long as the session: wait for the connection, keep our place.
        await this.#whenConnected(stop);
      }
    }
  }

  /** Resolves when `path` no longer exists (or changed), watching only that node. */
  #waitGone(path: string, stop: Interrupt): Promise<void> {
    if (stop.fired) return Promise.reject(stop.reason);
    return new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (error?: unknown) => {
        if (done) return;
        done = true;
        unsubscribe();
        if (error === undefined) resolve();
        else reject(error);
      };
      const unsubscribe = stop.subscribe((reason) => finish(reason));
      exists(this.client, path, () => finish()).then(
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
      await this.#call("a delete", remove(this.client, path));
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
    if (this.#ended.fired) return Promise.resolve();
    const known = this.#orphans.get(attemptId);
    if (known === undefined) this.#orphans.set(attemptId, { dir, attemptId, path });
    else if (path !== undefined) known.path = path;
    return this.#cleanOrphans();
  }

  /** Deletes every orphan it can; the rest are tried again on reconnect and on keepAlive. */
  #cleanOrphans(): Promise<void> {
    if (this.#cleaning !== undefined) return this.#cleaning.then(() => this.#cleanOrphans());
    if (!this.#connected || this.#ended.fired) return Promise.resolve();
    const run = async () => {
      await Promise.all(
        [...this.#orphans.values()].map(async (orphan) => {
          try {
            const path = orphan.path ?? (await this.#findAttempt(orphan.dir, orphan.attemptId));
            if (path !== undefined) await this.#call("a delete", remove(this.client, path));
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
    const path = (grant.handle as NodeHandle | undefined)?.path;
    if (path === undefined || !this.#held.delete(path)) return false;
    try {
      await this.#call("a delete", remove(this.client, path));
      return true;
    } catch (error) {
      const code = zkCode(error);
      if (code === ZK_CODE.noNode || code === ZK_CODE.sessionExpired) return false;
      if (error instanceof SessionLostError) return false;
      // Not known to be gone: keep trying to delete it while the session lives.
      const node = parseNode(path.slice(path.lastIndexOf("/") + 1));
      if (node !== undefined)
        void this.#orphan(path.slice(0, path.lastIndexOf("/")), node.attemptId, path);
      throw toBatonError(error, `releasing "${grant.key}"`);
    }
  }

  async holder(key: string): Promise<Holder | null> {
    this.#assertLive();
    try {
      // The session check goes through the leader; the server applies every earlier commit
      // before answering it, so the list read right after it (same session, in order) is not
      // stale: a release or grant by another client is seen once it has been acknowledged.
      const barrier = this.#call("a session check", touchSession(this.client));
      barrier.catch(() => undefined);
      const holder = await this.#readHolder(this.#dir(key));
      await barrier;
      return holder;
    } catch (error) {
      if (zkCode(error) === ZK_CODE.noNode) return null;
      throw toBatonError(error, `reading the holder of "${key}"`);
    }
  }

  /** The first node's owner, token and value; `null` when the queue is empty. */
  async #readHolder(dir: string, watcher?: () => void, stop?: Interrupt): Promise<Holder | null> {
    for (;;) {
      const children = await this.#call(
        "a list of waiters",
        watcher === undefined
          ? getChildren(this.client, dir)
          : getChildren(this.client, dir, watcher),
        stop,
      );
      const first = queueOrder(children)[0];
      if (first === undefined) return null;
      let node: { data: Buffer; stat: Stat };
      try {
        node = await this.#call(
          "a read of the holder",
          getData(this.client, `${dir}/${first.name}`),
          stop,
        );
      } catch (error) {
        if (zkCode(error) === ZK_CODE.noNode) continue;
        throw error;
      }
      const data = decodeNodeData(node.data);
      const token = czxidToken(node.stat.czxid);
      return data.value === undefined
        ? { ownerId: data.ownerId, token }
        : { ownerId: data.ownerId, token, value: data.value };
    }
  }

  async *watch(key: string, signal: AbortSignal): AsyncIterable<Holder | null> {
    const dir = this.#dir(key);
    const { interrupt: stop, dispose } = Interrupt.of(signal, this.#ended);
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
                "a watch of the lock's parent",
                exists(this.client, dir, () => wake()),
                stop,
              );
              if (stat !== null) wake();
            } catch (inner) {
              if (signal.aborted) return;
              if (!isConnectionLoss(inner)) throw toBatonError(inner, `watching "${key}"`);
              await this.#whenConnected(stop).catch(() => undefined);
              continue;
            }
          } else if (isConnectionLoss(error)) {
            await this.#whenConnected(stop).catch(() => undefined);
            continue;
          } else throw toBatonError(error, `watching "${key}"`);
        }
        const seen = holder === null ? "" : `${holder.token}`;
        if (seen !== last) {
          last = seen;
          yield holder;
        }
        if (signal.aborted) return;
        await new Promise<void>((resolve) => {
          const unsubscribe = stop.subscribe(() => resolve());
          changed.then(() => {
            unsubscribe();
            resolve();
          });
        });
      }
    } finally {
      dispose();
    }
  }

  async close(): Promise<void> {
    if (this.#ended.fired) {
      if (this.#settings.ownsClient) closeClient(this.client, 0);
      return;
    }
    const held = [...this.#held];
    this.#end(new SessionLostError("the ZooKeeper session was closed"), false);
    if (this.#settings.ownsClient) {
      await closeClient(this.client, CLOSE_BOUND_MS);
      return;
    }
    // A shared client lives on: delete what this session created.
    const orphans = [...this.#orphans.values()];
    this.#orphans.clear();
    await Promise.allSettled([
      ...held.map((path) =>
        bounded(remove(this.client, path), "a delete", { timeoutMs: CLOSE_BOUND_MS }),
      ),
      ...orphans
        .filter((o) => o.path !== undefined)
        .map((o) =>
          bounded(remove(this.client, o.path as string), "a delete", { timeoutMs: CLOSE_BOUND_MS }),
        ),
    ]);
  }
}

function vanished(path: string): BackendUnavailableError {
  return new BackendUnavailableError(
    `zookeeper: our lock node ${path} disappeared while we waited (deleted by hand, or the session ended)`,
  );
}

/**
 * Closes a client: the server deletes its ephemeral nodes at once. Waits at most `boundMs` for
 * the server's confirmation; a client that is not connected cannot tell the server, and its
 * nodes go when the session times out.
 */
export function closeClient(client: Client, boundMs: number): Promise<void> {
  const state = client.getState();
  const connected = state === zookeeper.State.SYNC_CONNECTED;
  return new Promise<void>((resolve) => {
    if (!connected || boundMs <= 0) {
      try {
        client.close();
      } catch {
        // already closed
      }
      resolve();
      return;
    }
    const timer = setTimeout(() => {
      // No confirmation (a dead or silent server): drop the socket, or it would keep the
      // process alive; the server ends the session when it times out.
      const manager = (client as unknown as { connectionManager?: { socket?: unknown } })
        .connectionManager;
      (manager?.socket as { destroy?: () => void } | undefined)?.destroy?.();
      done();
    }, boundMs);
    function done() {
      clearTimeout(timer);
      client.removeListener("disconnected", done);
      resolve();
    }
    client.once("disconnected", done);
    client.close();
  });
}
