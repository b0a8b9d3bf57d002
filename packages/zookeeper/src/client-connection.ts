/**
 * Connecting and closing a node-zookeeper-client. The client keeps its connection state in a
 * private connection manager and never times out a connect attempt or a silent connection
 * itself; what Baton needs of it (has it started? is it closed for good? drop the socket) is
 * read here, in one place.
 */
import { BackendUnavailableError } from "@baton/core";
import type { Client } from "node-zookeeper-client";
import zookeeper from "node-zookeeper-client";

/** The connection manager's states (its `STATES`) that Baton reads. */
const MANAGER_STATE = {
  /** Before the first `connect()`. */
  disconnected: 0,
  connecting: 1,
  connected: 2,
} as const;

/** The client's private connection manager, as far as Baton reads it. */
interface ConnectionManager {
  /** Negative once closing, closed, expired or refused (CLOSING ... AUTHENTICATION_FAILED). */
  state?: unknown;
  socket?: { destroy?: () => void; cork?: () => void; uncork?: () => void };
  onSocketError?: unknown;
  /** The queue of requests not written yet; emits `readable` on each push. */
  packetQueue?: {
    queue?: { request?: { header?: { type?: unknown } | null } }[];
    listeners?: (event: string) => ((...args: unknown[]) => void)[];
    removeListener?: (event: string, listener: (...args: unknown[]) => void) => void;
    on?: (event: string, listener: () => void) => void;
  };
  /** Writes every queued request that the connection's state lets out. */
  onPacketQueueReadable?: unknown;
  /** The longest pause (ms) before a connect attempt once every member was tried. */
  spinDelay?: unknown;
  /** The ensemble members the client tries in turn. */
  servers?: unknown;
}

function managerOf(client: Client): ConnectionManager | undefined {
  return (client as unknown as { connectionManager?: ConnectionManager }).connectionManager;
}

/** True when the client can never connect again (closed, its session expired, or refused). */
export function isClosedForGood(client: Client): boolean {
  const state = managerOf(client)?.state;
  return typeof state === "number" && state < 0;
}

/**
 * Drops the client's connection while it connects or is connected (never while it closes):
 * the client then reconnects, to another member if this one is gone. For a connection that
 * stopped answering, which the client itself would hold forever (it has no read timeout).
 */
export function dropConnection(client: Client): void {
  const manager = managerOf(client);
  const live =
    manager?.state === MANAGER_STATE.connecting || manager?.state === MANAGER_STATE.connected;
  if (live) manager?.socket?.destroy?.();
}

/** The close-session request's op code: written at once, since the socket may go right after. */
const CLOSE_SESSION_OP = -11;

/**
 * Makes `client` write the requests made in one tick of the event loop together, in one socket
 * write, instead of one write (one system call) per request as it does by itself: concurrent
 * acquires and releases, and the pipelined list of waiters and stat of a node, then share a
 * write. The requests still leave in the order they were made, before any timer or I/O
 * callback runs. A client whose internals do not have the expected shape is left as it is.
 */
export function coalesceWrites(client: Client): void {
  const manager = managerOf(client);
  const queue = manager?.packetQueue;
  const flush = manager?.onPacketQueueReadable;
  if (manager === undefined || queue === undefined || typeof flush !== "function") return;
  const listeners = queue.listeners?.("readable");
  if (listeners?.length !== 1 || queue.removeListener === undefined || queue.on === undefined)
    return;
  queue.removeListener("readable", listeners[0] as (...args: unknown[]) => void);
  let scheduled = false;
  const write = () => {
    scheduled = false;
    const socket = manager.socket;
    socket?.cork?.();
    try {
      flush.call(manager);
    } finally {
      socket?.uncork?.();
    }
  };
  queue.on("readable", () => {
    const last = queue.queue?.[queue.queue.length - 1];
    if (last?.request?.header?.type === CLOSE_SESSION_OP) write();
    else if (!scheduled) {
      scheduled = true;
      process.nextTick(write);
    }
  });
}

/**
 * Connects `client` (calling `connect()` unless `mayBeStarted` and it has started) and
 * resolves once a session is established; rejects with `BackendUnavailableError` after
 * `timeoutMs` (naming `members` and the last connection error), or the signal's reason.
 *
 * The client waits for a member's answer for as long as the connection stays open, so a member
 * that accepts connections and never answers (frozen, or cut off after the accept) would hold
 * the whole `timeoutMs`. Each member gets a share of it instead ({@link memberShareMs}): with no
 * session by then, the connection is dropped and the client tries the next member.
 */
export function connect(
  client: Client,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  members: string,
  mayBeStarted = false,
): Promise<void> {
  const started = performance.now();
  const lastError = watchSocketErrors(client);
  const shareMs = memberShareMs(client, timeoutMs);
  return new Promise<void>((resolve, reject) => {
    let share: ReturnType<typeof setTimeout> | undefined;
    const nextMember = () => {
      dropConnection(client);
      share = setTimeout(nextMember, shareMs);
    };
    const cleanup = () => {
      lastError.stop();
      clearTimeout(timer);
      clearTimeout(share);
      client.removeListener("connected", onConnected);
      client.removeListener("expired", onExpired);
      client.removeListener("authenticationFailed", onAuth);
      signal?.removeEventListener("abort", onAbort);
    };
    const onConnected = () => {
      cleanup();
      resolve();
    };
    const fail = (error: unknown) => {
      cleanup();
      reject(error);
    };
    const onExpired = () =>
      fail(
        new BackendUnavailableError(
          `zookeeper: the new session with ${members} expired before it was established; check the ensemble's health (zkServer.sh status) and retry`,
        ),
      );
    const onAuth = () =>
      fail(
        new BackendUnavailableError(
          `zookeeper: ${members} refused the client's credentials; check the digest or SASL settings of the client you pass`,
        ),
      );
    const onAbort = () => fail(signal?.reason);
    const timer = setTimeout(() => {
      const cause = lastError.error;
      const detail = cause === undefined ? "no answer" : `last error: ${cause.message}`;
      fail(
        new BackendUnavailableError(
          `zookeeper: no ensemble member of ${members} accepted a session within ${Math.round(performance.now() - started)} ms (${detail}); check that ZooKeeper runs there and is reachable from here`,
          cause === undefined ? undefined : { cause },
        ),
      );
    }, timeoutMs);
    client.on("connected", onConnected);
    client.on("expired", onExpired);
    client.on("authenticationFailed", onAuth);
    signal?.addEventListener("abort", onAbort, { once: true });
    const state = managerOf(client)?.state;
    if (!mayBeStarted || state === MANAGER_STATE.disconnected || state === undefined) {
      client.connect();
    }
    if (shareMs < timeoutMs) share = setTimeout(nextMember, shareMs);
  });
}

/** Below this, a member's share of the connect time is not cut: a session takes a commit. */
const MIN_MEMBER_SHARE_MS = 500;

/**
 * How long one member may take to answer before the client moves on: `timeoutMs` split over
 * the members plus one, at least 500 ms, so every member is tried within the time with a share
 * left for one more try. A client of another shape, or with one member, keeps the whole time.
 */
function memberShareMs(client: Client, timeoutMs: number): number {
  const servers = managerOf(client)?.servers;
  const count = Array.isArray(servers) ? servers.length : 1;
  if (count < 2) return timeoutMs;
  return Math.max(MIN_MEMBER_SHARE_MS, Math.floor(timeoutMs / (count + 1)));
}

/**
 * Remembers the last socket error of `client`'s connection attempts (the client itself only
 * retries and keeps no record), so a connect that times out can say why. Wraps the connection
 * manager's `onSocketError`, which it binds anew on every attempt; without one (a client of
 * another shape) it records nothing.
 */
function watchSocketErrors(client: Client): { readonly error: Error | undefined; stop(): void } {
  const manager = managerOf(client);
  const original = manager?.onSocketError;
  const record: { error: Error | undefined; stop(): void } = {
    error: undefined,
    stop: () => undefined,
  };
  if (manager === undefined || typeof original !== "function") return record;
  const own = Object.hasOwn(manager, "onSocketError");
  manager.onSocketError = function (this: unknown, error: unknown) {
    if (error instanceof Error) record.error = error;
    return (original as (e: unknown) => unknown).call(this, error);
  };
  record.stop = () => {
    if (own) manager.onSocketError = original;
    else delete manager.onSocketError;
  };
  return record;
}

/**
 * Closes a client: the server deletes its ephemeral nodes at once. Waits at most `boundMs` for
 * the server's confirmation; a client that is not connected cannot tell the server, and its
 * nodes go when the session times out. Its socket is destroyed either way once the bound has
 * passed (at once when not connected), also one the client opens after `close()` (a connect
 * attempt it had already scheduled), so nothing is left open to a server that never answers.
 */
export function closeClient(client: Client, boundMs: number): Promise<void> {
  const connected = client.getState() === zookeeper.State.SYNC_CONNECTED;
  return new Promise<void>((resolve) => {
    if (!connected || boundMs <= 0) {
      try {
        client.close();
      } catch {
        // already closed
      }
      dropSocketForGood(client);
      resolve();
      return;
    }
    const timer = setTimeout(() => {
      // No confirmation (a dead or silent server): drop the socket, or it would keep the
      // process alive; the server ends the session when it times out.
      dropSocketForGood(client);
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

/**
 * Destroys the socket of a client that was closed, now and once more after its spin delay: a
 * connect attempt the client scheduled before `close()` still opens a socket (the client does
 * not check its state then), which would otherwise stay open to a server that never answers.
 */
function dropSocketForGood(client: Client): void {
  const manager = managerOf(client);
  if (manager === undefined) return;
  manager.socket?.destroy?.();
  const spinDelay = typeof manager.spinDelay === "number" ? manager.spinDelay : 1_000;
  setTimeout(() => manager.socket?.destroy?.(), spinDelay + 20).unref();
}
