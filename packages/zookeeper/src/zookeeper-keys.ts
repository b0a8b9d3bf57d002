/**
 * The node layout: every path and node name Baton writes in ZooKeeper, built here, and the
 * names of the contenders other ZooKeeper lock libraries create beside Baton's.
 *
 * A lock is a persistent parent node, `<chroot>/<prefix>/<encoded lock name>`. Every
 * acquisition adds one EPHEMERAL_SEQUENTIAL child named `_c_<attempt id>-lock-<sequence>`:
 * the lowest sequence holds the lock. The name is Curator's "protected" mode layout (the
 * `InterProcessMutex` recipe), so Curator clients and Baton queue on the same parent; the
 * attempt id lets a retry find the node that a lost reply created.
 *
 * The queue counts every node a Curator or kazoo lock creates on the same parent (see
 * {@link parseLockNode}), ordered by the sequence ZooKeeper appended: the parent's one
 * counter numbers every child, whoever created it.
 *
 * A durable record (what `coordinator.runOnce` keeps per job and slot) is a persistent node
 * `<chroot>/<prefix>-records/<encoded key>` whose data is the record's value: beside the lock
 * parents, never among them.
 *
 * A semaphore or read-write lock is a persistent parent `<chroot>/<prefix>-permits/<encoded
 * name>`, also beside the lock parents, whose children are its one queue of holders and
 * waiters: EPHEMERAL_SEQUENTIAL nodes named like the leases of Curator's
 * `InterProcessSemaphoreV2` (`_c_<attempt id>-lease-<permits>-of-<limit>-<sequence>`) and the
 * nodes of its `InterProcessReadWriteLock` (`_c_<attempt id>-__READ__<sequence>`,
 * `_c_<attempt id>-__WRIT__<sequence>`), so one list of the children tells every entry's
 * permits and limit (see {@link parsePermitNode}).
 */

/** Curator's protected-mode prefix: `_c_` followed by the attempt id. */
export const PROTECTED_PREFIX = "_c_";

/** Separates the attempt id from ZooKeeper's sequence suffix (Curator's lock node name). */
export const LOCK_NODE_MARKER = "-lock-";

/**
 * The sequence ZooKeeper appends to a sequential node's name: its parent's counter, a signed
 * 32-bit integer printed `%010d` (10 digits; negative, `-` and 9 or 10 digits, once the
 * counter wraps).
 */
const SEQUENCE = String.raw`(\d{10}|-\d{9,10})`;

/**
 * Baton's node name, which is also Curator's protected-mode lock node (`InterProcessMutex`,
 * and so `LeaderSelector`): `_c_<UUID>-lock-<sequence>`. The name alone cannot tell the two
 * apart; the node's data does (see zookeeper-codec.ts).
 */
const PROTECTED_NODE = new RegExp(
  `^${PROTECTED_PREFIX}([0-9a-f-]{36})${LOCK_NODE_MARKER}${SEQUENCE}$`,
);

/**
 * Any other Curator lock node: `<anything>-lock-<sequence>` or a plain `lock-<sequence>`
 * (Curator's lock name is `lock-`, and it sorts a child by what follows that name's last
 * occurrence).
 */
const CURATOR_NODE = new RegExp(`^(?:.*-)?lock-${SEQUENCE}$`);

/**
 * A kazoo lock node: `<32 hex digits>__lock__<sequence>` (`Lock`, `WriteLock`, and so
 * `Election`) or `<32 hex digits>__rlock__<sequence>` (`ReadLock`). A read lock shares the
 * lock with other readers, never with a writer: Baton's lock is exclusive, so it waits for
 * readers too.
 */
const KAZOO_NODE = new RegExp(`^[0-9a-f]{32}__r?lock__${SEQUENCE}$`);

/**
 * Which library's layout a contender's name has: `protected` (Baton's own, or Curator's
 * protected mode: the data tells), `curator` (Curator without protection) or `kazoo`.
 */
export type NodeLayout = "protected" | "curator" | "kazoo";

/** One contender in a lock parent's children, parsed from its name. */
export interface LockNode {
  /** The child's name. */
  readonly name: string;
  /** Whose layout the name has. */
  readonly layout: NodeLayout;
  /**
   * The attempt id in a `protected` name (Baton's, or a Curator client's own UUID);
   * `undefined` for the other layouts.
   */
  readonly attemptId?: string;
  /** ZooKeeper's sequence suffix (queue order within one parent incarnation). */
  readonly seq: number;
}

/** The node that holds the lock parents: `<chroot>/<prefix>` (`chroot` without a trailing `/`). */
export function lockRoot(chroot: string, prefix: string): string {
  return `${chroot}/${prefix}`;
}

/** Appended to the locks root's name to name the records root beside it. */
export const RECORDS_SUFFIX = "-records";

/**
 * The node that holds the records, beside the locks root `lockRoot`:
 * `<chroot>/<prefix>-records`.
 */
export function recordRoot(lockRoot: string): string {
  return `${lockRoot}${RECORDS_SUFFIX}`;
}

/** The node of record `key` under `root` (the records root), its key encoded as a lock name is. */
export function recordPath(root: string, key: string): string {
  return `${root}/${encodeLockName(key)}`;
}

/** The parent node of lock `name` under `root`: its children are the lock's queue. */
export function lockDir(root: string, name: string): string {
  return `${root}/${encodeLockName(name)}`;
}

/**
 * Encodes a lock name as one ZooKeeper node name: percent-encoding removes `/` and every
 * character ZooKeeper refuses; `.` and `..` are spelled out.
 */
export function encodeLockName(name: string): string {
  const encoded = encodeURIComponent(name);
  if (encoded === ".") return "%2E";
  if (encoded === "..") return "%2E%2E";
  return encoded;
}

/**
 * The path to create for attempt `attemptId` in `dir`: `<dir>/_c_<attempt id>-lock-`, to which
 * ZooKeeper appends the sequence.
 */
export function lockNodePrefix(dir: string, attemptId: string): string {
  return `${dir}/${PROTECTED_PREFIX}${attemptId}${LOCK_NODE_MARKER}`;
}

/** The full path of child `name` of `dir`. */
export function childPath(dir: string, name: string): string {
  return `${dir}/${name}`;
}

/** Splits a node's path into its parent's path and its own name. */
export function splitPath(path: string): { readonly dir: string; readonly name: string } {
  const at = path.lastIndexOf("/");
  return { dir: path.slice(0, at), name: path.slice(at + 1) };
}

/**
 * Parses a child name: a Baton or Curator protected node, another Curator lock node, or a
 * kazoo lock node; `undefined` for every other node (Curator's `-latch-` nodes, for one),
 * which the queue leaves out.
 */
export function parseLockNode(name: string): LockNode | undefined {
  let m = PROTECTED_NODE.exec(name);
  if (m !== null) {
    return { name, layout: "protected", attemptId: m[1] as string, seq: Number(m[2]) };
  }
  m = KAZOO_NODE.exec(name);
  if (m !== null) return { name, layout: "kazoo", seq: Number(m[1]) };
  m = CURATOR_NODE.exec(name);
  if (m !== null) return { name, layout: "curator", seq: Number(m[1]) };
  return undefined;
}

/** The contenders among `children`, in queue order (lowest sequence first). */
export function queueOrder(children: readonly string[]): LockNode[] {
  const nodes: LockNode[] = [];
  for (const child of children) {
    const node = parseLockNode(child);
    if (node !== undefined) nodes.push(node);
  }
  return nodes.sort((a, b) => a.seq - b.seq);
}

/** Appended to the locks root's name to name the permits root beside it. */
export const PERMITS_SUFFIX = "-permits";

/**
 * The node that holds the semaphores and read-write locks, beside the locks root `lockRoot`:
 * `<chroot>/<prefix>-permits`.
 */
export function permitRoot(lockRoot: string): string {
  return `${lockRoot}${PERMITS_SUFFIX}`;
}

/** The parent node of permit key `name` under `root` (the permits root): its queue. */
export function permitDir(root: string, name: string): string {
  return `${root}/${encodeLockName(name)}`;
}

/** The limit a read-write lock's entries stand for: a read takes 1 permit, a write all. */
export const READ_WRITE_PERMITS = 2_147_483_647;

/** How an entry of a permit queue takes its token (core's `PermitMode`). */
export type PermitNodeMode = "permit" | "read" | "write";

/** Curator's semaphore lease name, followed here by the entry's permits and limit. */
const LEASE_MARKER = "-lease-";
/** Curator's read-write lock node names. */
const READ_MARKER = "-__READ__";
/** See {@link READ_MARKER}. */
const WRITE_MARKER = "-__WRIT__";
/** Between a downgraded read's marker and the write's sequence whose place it keeps. */
const DOWNGRADED = "at-";

const ATTEMPT = "([0-9a-f-]{36})";
const LEASE_NODE = new RegExp(
  `^${PROTECTED_PREFIX}${ATTEMPT}${LEASE_MARKER}([1-9]\\d{0,9})-of-([1-9]\\d{0,9})-${SEQUENCE}$`,
);
const READ_WRITE_NODE = new RegExp(
  `^${PROTECTED_PREFIX}${ATTEMPT}-__(READ|WRIT)__(?:${DOWNGRADED}${SEQUENCE}-)?${SEQUENCE}$`,
);

/** One entry in a permit key's queue, parsed from its name. */
export interface PermitNode {
  /** The child's name. */
  readonly name: string;
  /** The attempt id of the acquire that created it. */
  readonly attemptId: string;
  /** How it takes its token. */
  readonly mode: PermitNodeMode;
  /** The permits it takes. */
  readonly permits: number;
  /** The key's limit as this entry's acquire asked for it. */
  readonly limit: number;
  /** ZooKeeper's sequence suffix. */
  readonly seq: number;
  /**
   * Its place in the queue: its own sequence, or, for a read a write was downgraded to, the
   * write's (the read keeps the write's place: see {@link permitNodePrefix}).
   */
  readonly order: number;
}

/** What the name of a new permit entry tells. */
export interface PermitNodeRequest {
  readonly attemptId: string;
  readonly mode: PermitNodeMode;
  /** The permits it takes (`"permit"` only; a read takes 1, a write all). */
  readonly permits: number;
  /** The key's limit (`"permit"` only; a read-write lock's is {@link READ_WRITE_PERMITS}). */
  readonly limit: number;
  /**
   * A read made by downgrading a write: the write's sequence, as its name spells it. The read
   * takes the write's place in the queue, ahead of every entry that was behind the write.
   */
  readonly downgradedFrom?: string;
}

/**
 * The path to create for a permit entry in `dir`, to which ZooKeeper appends the sequence:
 * `<dir>/_c_<attempt id>-lease-<permits>-of-<limit>-` for a semaphore's permits,
 * `<dir>/_c_<attempt id>-__READ__` or `-__WRIT__` for a read-write lock's read or write, and
 * `<dir>/_c_<attempt id>-__READ__at-<write's sequence>-` for a downgraded write.
 */
export function permitNodePrefix(dir: string, request: PermitNodeRequest): string {
  const head = `${dir}/${PROTECTED_PREFIX}${request.attemptId}`;
  switch (request.mode) {
    case "permit":
      return `${head}${LEASE_MARKER}${request.permits}-of-${request.limit}-`;
    case "write":
      return `${head}${WRITE_MARKER}`;
    case "read":
      return request.downgradedFrom === undefined
        ? `${head}${READ_MARKER}`
        : `${head}${READ_MARKER}${DOWNGRADED}${request.downgradedFrom}-`;
  }
}

/** The sequence suffix of a sequential node's name, as the server spelt it. */
export function sequenceText(name: string): string {
  const m = new RegExp(`${SEQUENCE}$`).exec(name);
  if (m === null) throw new Error(`zookeeper: ${name} has no sequence suffix`);
  return m[1] as string;
}

/** Parses a permit entry's name; `undefined` for every other child, which the queue leaves out. */
export function parsePermitNode(name: string): PermitNode | undefined {
  let m = LEASE_NODE.exec(name);
  if (m !== null) {
    const seq = Number(m[4]);
    return {
      name,
      attemptId: m[1] as string,
      mode: "permit",
      permits: Number(m[2]),
      limit: Number(m[3]),
      seq,
      order: seq,
    };
  }
  m = READ_WRITE_NODE.exec(name);
  if (m === null) return undefined;
  const read = m[2] === "READ";
  const seq = Number(m[4]);
  return {
    name,
    attemptId: m[1] as string,
    mode: read ? "read" : "write",
    permits: read ? 1 : READ_WRITE_PERMITS,
    limit: READ_WRITE_PERMITS,
    seq,
    order: m[3] === undefined ? seq : Number(m[3]),
  };
}

/** The permit entries among `children`, in queue order (lowest place first). */
export function permitQueueOrder(children: readonly string[]): PermitNode[] {
  const nodes: PermitNode[] = [];
  for (const child of children) {
    const node = parsePermitNode(child);
    if (node !== undefined) nodes.push(node);
  }
  return nodes.sort((a, b) => a.order - b.order || a.seq - b.seq);
}

/** The name prefix every node of attempt `attemptId` has, a lock's or a permit entry's. */
export function attemptNamePrefix(attemptId: string): string {
  return `${PROTECTED_PREFIX}${attemptId}-`;
}

/**
 * A lock name as its node name encodes it (see {@link encodeLockName}), or `undefined` for a
 * node name Baton did not encode.
 */
export function decodeLockName(encoded: string): string | undefined {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}

/** Appended to the locks root's name to name the root of the revocation nodes beside it. */
export const REVOCATIONS_SUFFIX = "-revoked";

/**
 * The node that holds the revocation nodes a forced release writes, beside the locks root:
 * `<chroot>/<prefix>-revoked`.
 */
export function revocationRoot(lockRoot: string): string {
  return `${lockRoot}${REVOCATIONS_SUFFIX}`;
}

/**
 * The revocation node of a grant whose node was `heldPath`, under `root` (the revocation
 * root): one PERSISTENT node named after that path (percent-encoded), so the holder's session
 * finds it from the path it held.
 */
export function revocationPath(root: string, heldPath: string): string {
  return `${root}/${encodeURIComponent(heldPath)}`;
}
