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
