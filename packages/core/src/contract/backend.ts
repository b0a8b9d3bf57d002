import type { Guarantees } from "./guarantees.js";

/**
 * The contract every adapter implements. A backend is a connection factory for one store;
 * a session is the unit of liveness: every lock taken through it lives and dies with it.
 *
 * Core owns option validation, timeouts, cancellation, retries, the keepalive loop, local
 * deadlines, signals, events and modes. A backend owns the round trips.
 */
export interface LockBackend {
  /** `"memory"`, `"redis"`, `"redlock"`, `"etcd"`, `"zookeeper"`, `"postgres"`, or a third party's. */
  readonly kind: string;
  /** What this backend promises; see {@link Guarantees}. */
  readonly guarantees: Guarantees;
  /**
   * Where the backend connects, for messages about it: `host:port`, or a list of them
   * separated by `", "` (a cluster's nodes, an ensemble's members), or a socket or file path.
   * Never credentials, nor a whole URL (which may carry them). Core names it in its own errors
   * and log lines about this backend (a session that did not open in time, failing
   * renewals), e.g. `the postgres store at db1:5432 did not open a session within 5000 ms`.
   * Optional: without it core names the backend by its `kind` alone.
   */
  readonly endpoint?: string | undefined;
  /**
   * Opens a session with the given TTL. Rejects with `ConfigError` for a TTL the store cannot
   * honour, `BackendUnavailableError` when the store cannot be reached, or the signal's reason.
   */
  openSession(options: OpenSessionOptions): Promise<BackendSession>;
  /** Closes every session and connection the backend opened. Idempotent. */
  close(): Promise<void>;
}

/** Options of {@link LockBackend.openSession}. */
export interface OpenSessionOptions {
  /** Lease length in milliseconds. */
  readonly ttlMs: number;
  /** Who holds the locks of this session, as shown by `holder()`. */
  readonly ownerId: string;
  /** Cancels the open. */
  readonly signal?: AbortSignal;
}

/** What {@link BackendSession.keepAlive} learned besides "the session lives". */
export interface KeepAliveResult {
  /**
   * Lock keys this session held that the store no longer holds for it (the session itself
   * lives). Plain locks only: a permit key named here ends nothing. A backend that finds a
   * session's permits gone throws `SessionLostError` instead.
   */
  readonly lostKeys?: readonly string[];
  /**
   * Grants of this session that were force-released at the store (see
   * {@link BackendSession.forceRelease}) since the last renewal, with the reason given there.
   * A lock named here needs no entry in `lostKeys`; a permit grant named here ends that grant
   * alone (the session and its other permits live on). Report each revocation the renewal
   * after it happened, within one renewal interval.
   */
  readonly revoked?: readonly RevokedGrant[];
}

/** A grant an operator force-released, as {@link KeepAliveResult.revoked} reports it. */
export interface RevokedGrant {
  /** `"lock"`: a plain lock's key; `"permit"`: a permit key (one grant of it, by `token`). */
  readonly space: "lock" | "permit";
  /** The key as the coordinator passed it. */
  readonly key: string;
  /** The revoked grant's token. */
  readonly token: bigint;
  /** The reason given to `forceRelease`. */
  readonly reason: string;
}

/**
 * The key spaces of a store that inspection lists: plain locks, permit keys (semaphores and
 * read-write locks) and durable records (runOnce's jobs and slots).
 */
export type KeySpace = "lock" | "permit" | "record";

/** Options of {@link BackendSession.listKeys}. */
export interface ListKeysOptions {
  /** Which key space to list. */
  readonly space: KeySpace;
  /** Only keys (as the coordinator names them) that start with this; `""` for all. */
  readonly prefix: string;
  /** Where the previous page ended (its {@link KeyPage.cursor}); absent for the first page. */
  readonly cursor?: string;
  /**
   * At most this many keys in the page (1 to 1000). A page may hold fewer, even none while
   * more follow (a store that filters after reading); only an absent `cursor` ends the list.
   */
  readonly limit: number;
  /** Cancels the read: reject with its reason. */
  readonly signal: AbortSignal;
}

/** One page of {@link BackendSession.listKeys}. */
export interface KeyPage {
  /** Keys as the coordinator names them, each once per list (in any order). */
  readonly keys: readonly string[];
  /** Pass it back for the next page; absent when this was the last page. */
  readonly cursor?: string;
}

/** A holder as {@link BackendSession.inspectKey} reports it. */
export interface InspectedHolder extends Holder {
  /** Milliseconds since this grant began, when the store tells (by the store's clock). */
  readonly heldMs?: number;
  /** Permit keys: the permits this grant holds. */
  readonly permits?: number;
  /** Permit keys: how it was granted. */
  readonly mode?: PermitMode;
}

/** Who waits for a key, as far as the store knows. */
export interface KeyWaiters {
  /** How many acquirers wait. */
  readonly count: number;
  /** Their owner ids in queue order, where the store keeps a queue. */
  readonly ownerIds?: readonly string[];
}

/** What {@link BackendSession.inspectKey} reads of one key. */
export interface KeyState {
  /** Current holders: at most one for a lock; the granted entries, in grant order, for a permit key. */
  readonly holders: readonly InspectedHolder[];
  /** Waiters, when the store can tell (a queue, or waiters registered at the store). */
  readonly waiters?: KeyWaiters;
  /** Permit keys: the stored limit. */
  readonly limit?: number;
}

/** Options of {@link BackendSession.forceRelease}. */
export interface ForceReleaseOptions {
  /** The grant to free: only the grant with this token is released. */
  readonly token: bigint;
  /** Why, as an operator wrote it: reported to the holder's session with the revocation. */
  readonly reason: string;
  /** Cancels the call. */
  readonly signal: AbortSignal;
}

/** Options of {@link BackendSession.acquire}. */
export interface BackendAcquireOptions {
  /** `false`: try once and resolve `null` when held. `true`: wait until granted or aborted. */
  readonly wait: boolean;
  /** Published with the grant (holder's value; the leader's address in an election). */
  readonly value?: string;
  /**
   * Aborts a wait. The backend must then reject with `signal.reason` and leave nothing behind
   * (no queue entry that would delay later acquirers). A single try (the first attempt, or
   * `wait: false`) may ignore it: the coordinator checks it before the call and releases a
   * grant that arrives after it gave up. The coordinator builds this signal only when it is
   * first read (see docs/hot-path.md, "Core"), so a backend that reads it only when it is
   * about to wait keeps the uncontended path cheaper.
   */
  readonly signal: AbortSignal;
}

/** One live session with a store. */
export interface BackendSession {
  /** The owner id stored with every grant of this session. */
  readonly ownerId: string;
  /** The TTL the store granted (it may differ from the one asked for, e.g. ZooKeeper). */
  readonly ttlMs: number;
  /**
   * Aborted (with a `SessionLostError` reason) when the backend learns on its own that the
   * session is gone: a closed connection, an expired ZooKeeper session.
   */
  readonly lost?: AbortSignal;
  /**
   * Renews the session and everything it holds in one round trip. Throws `SessionLostError`
   * when the session is gone, `BackendUnavailableError` when the store did not answer. It must
   * settle within about a third of the TTL (bound your request): core never starts a second
   * renewal while one is in flight, so a renewal that never settles stops the loop (the local
   * deadline still fires).
   */
  keepAlive(): Promise<KeepAliveResult | undefined>;
  /**
   * Acquires `key` for this session. Core never calls it twice for the same key on one
   * session before the first grant is released or lost.
   */
  acquire(key: string, options: BackendAcquireOptions): Promise<Grant | null>;
  /**
   * Owner-checked release. Resolves `false` when the grant was no longer this session's.
   * Owner checks are by session (and token), never by `ownerId` alone: two sessions with the
   * same `ownerId` still exclude each other. Once this settles, even by throwing, the session
   * no longer renews the grant, so a failed release ends by expiry within one TTL.
   */
  release(grant: Grant): Promise<boolean>;
  /** The current holder of `key`, or `null`. */
  holder(key: string): Promise<Holder | null>;
  /** Pushes the holder of `key` now and after every change, until `signal` aborts. */
  watch?(key: string, signal: AbortSignal): AsyncIterable<Holder | null>;
  /**
   * Reads the durable record `key`, or `null` when there is none. Records (what
   * `coordinator.runOnce` keeps per job and slot) live in the same store as the locks, in a
   * key space of their own, and never expire. Optional: a backend without records cannot
   * serve `runOnce`, which then fails with a `ConfigError`. Implement both methods or neither.
   */
  readRecord?(key: string): Promise<StoredRecord | null>;
  /**
   * Writes `value` to record `key` if, and only if, its version is still `expected` (`null`:
   * only if there is no record), in one atomic step of the store. Resolves the new version,
   * or `null` when the version did not match (nothing was written). Versions are opaque
   * strings; every successful write changes it, and a version never comes back: a record
   * deleted and written again (its store lost it) takes no write expecting a version from
   * before.
   */
  writeRecord?(key: string, value: string, expected: string | null): Promise<string | null>;
  /**
   * Acquires `options.permits` of the `options.limit` permits of `key`: a semaphore's
   * permits, or a read or write hold of a read-write lock (core asks a read for 1 permit and
   * a write for all {@link READ_WRITE_LIMIT} of them). Optional, with
   * {@link BackendSession.permitHolders} and {@link BackendSession.downgrade}: implement all
   * three and declare `semaphores: true`, or none.
   *
   * - Permit keys are a key space of their own: a lock, a record and a semaphore of one name
   *   are unrelated.
   * - The limit is stored with the key while it has holders or waiters. A request whose
   *   `limit` differs from the stored one rejects with a `PermitLimitError` and leaves
   *   nothing behind.
   * - Order: holders and waiters of `key` form one queue. A request is granted when the
   *   permits of every entry ahead of it (held or waiting) plus its own are at most the
   *   limit: it never overtakes a request that waits, so a multi-permit request (a write) is
   *   not starved by a stream of smaller ones (reads). A backend whose guarantees declare
   *   `fifo: false` still never lets a request overtake one that waits longer than a TTL.
   * - Tokens: `"permit"` and `"write"` grants take a token (above 0n) strictly greater than
   *   that of every grant of `key` ahead of them in the queue, so a grant that begins after
   *   another ended has the greater token; permits granted together may learn of their grants
   *   in any order. A `"read"` grant takes none of its own and carries the token of the newest
   *   write grant of `key` before it (0n when there was none). The store keeps the newest
   *   write token as long as it keeps its tokens' order, so a read after a write never
   *   carries less than that write.
   * - The permits live and die with the session: renewed by its one `keepAlive` request,
   *   however many it holds, and freed within a TTL of its death. One session may hold many
   *   permits of one key at once, and core may call this again for `key` before an earlier
   *   grant ends (unlike `acquire`).
   * - `wait`, `signal`: as for {@link BackendSession.acquire}; an aborted wait leaves no queue
   *   entry behind. `release(grant)` releases a permit grant.
   */
  acquirePermits?(key: string, options: BackendPermitOptions): Promise<Grant | null>;
  /**
   * The granted entries of permit key `key` (not its waiters), in the order they were
   * granted.
   */
  permitHolders?(key: string): Promise<PermitHolder[]>;
  /**
   * Turns `grant`, a `"write"` grant of {@link BackendSession.acquirePermits}, into a
   * `"read"` grant of 1 permit with the same token, in one atomic step: no other write can
   * come in between, and reads queued behind it may be granted at once. Resolves the read
   * grant (which `release` then takes), or `null` when `grant` was no longer this session's.
   */
  downgrade?(grant: Grant): Promise<Grant | null>;
  /**
   * Lists the keys of one key space, a page at a time, bounded in cost per page (a store scan
   * with a limit, not a read of everything). Optional, with {@link BackendSession.inspectKey}:
   * implement both and declare `inspection: true`, or neither.
   */
  listKeys?(options: ListKeysOptions): Promise<KeyPage>;
  /**
   * Reads one lock or permit key's holders and waiters, or `null` when it has neither (a
   * held key whose lease ran out at the store counts as free).
   */
  inspectKey?(space: "lock" | "permit", key: string): Promise<KeyState | null>;
  /**
   * Frees the grant of `key` whose token is `options.token`, held by any session, so the next
   * waiter can take it; resolves `false` when no such grant is held (already released, expired,
   * or a later grant holds the key). The holder's session learns it at its next renewal, as
   * {@link KeepAliveResult.revoked} with the reason. Where the store cannot free one grant of a
   * live session without its others, the backend declares `forceRelease: "session"` and ends
   * the holder's session (every grant of it is then revoked with the reason). Optional: declare
   * `forceRelease` in the guarantees when implemented.
   */
  forceRelease?(
    space: "lock" | "permit",
    key: string,
    options: ForceReleaseOptions,
  ): Promise<boolean>;
  /** Ends the session and frees every lock it holds. Idempotent; never throws for "already gone". */
  close(): Promise<void>;
}

/**
 * How a permit grant takes its token (see {@link BackendSession.acquirePermits}): `"permit"`
 * (a semaphore's) and `"write"` take a new, greater token; `"read"` carries the newest write's.
 */
export type PermitMode = "permit" | "read" | "write";

/** Options of {@link BackendSession.acquirePermits}. */
export interface BackendPermitOptions extends BackendAcquireOptions {
  /** The key's permits in all: 1 to {@link MAX_PERMITS}, or {@link READ_WRITE_LIMIT}. */
  readonly limit: number;
  /** The permits this grant takes: 1 to `limit`. */
  readonly permits: number;
  /** How the grant takes its token. */
  readonly mode: PermitMode;
}

/** A granted entry of a permit key, as {@link BackendSession.permitHolders} lists it. */
export interface PermitHolder extends Holder {
  /** The permits it holds. */
  readonly permits: number;
  /** How it was granted. */
  readonly mode: PermitMode;
}

/** The most permits a semaphore may have. */
export const MAX_PERMITS = 1_000_000;

/**
 * The limit core asks for a read-write lock's key: a read takes 1 permit, a write all of
 * them. Above {@link MAX_PERMITS}, so no semaphore shares it.
 */
export const READ_WRITE_LIMIT = 2_147_483_647;

/** A durable record as read by {@link BackendSession.readRecord}. */
export interface StoredRecord {
  /** What was written. */
  readonly value: string;
  /** The version to pass as `expected` to {@link BackendSession.writeRecord}. */
  readonly version: string;
}

/** Proof of one acquisition. */
export interface Grant {
  /** The backend key (the lock name as the coordinator passed it). */
  readonly key: string;
  /** Owner id of the session that holds it. */
  readonly ownerId: string;
  /** Fencing token: strictly greater for every later grant of the same key (see guarantees). */
  readonly token: bigint;
  /** Backend-private data needed to release exactly this grant. */
  readonly handle?: unknown;
}

/** Who holds a lock. */
export interface Holder {
  /** The holding session's owner id. */
  readonly ownerId: string;
  /** The holder's fencing token. */
  readonly token: bigint;
  /** The value published with the grant, if any. */
  readonly value?: string;
  /**
   * Time left on the holder's lease as the store sees it, when the store tells (Redis PTTL,
   * etcd lease TTL, PostgreSQL's session expiry or idle timeout). Absent when it cannot
   * (ZooKeeper does not tell one client when another's session expires).
   */
  readonly remainingMs?: number;
  /**
   * Set when another client library holds the lock on the same store entry (for example
   * `"curator"` or `"kazoo"` on ZooKeeper): its name. `ownerId` is then that library's own
   * data, as text, and there is no `value`.
   */
  readonly foreign?: string;
}
