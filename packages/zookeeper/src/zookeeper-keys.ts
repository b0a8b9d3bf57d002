/**
 * The node layout: every path and node name Baton writes in ZooKeeper, built here.
 *
 * A lock is a persistent parent node, `<chroot>/<prefix>/<encoded lock name>`. Every
 * acquisition adds one EPHEMERAL_SEQUENTIAL child named `_c_<attempt id>-lock-<sequence>`:
 * the lowest sequence holds the lock. The name is Curator's "protected" mode layout (the
 * `InterProcessMutex` recipe), so Curator clients and Baton queue on the same parent; the
 * attempt id lets a retry find the node that a lost reply created.
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
 * A Baton lock node's name: the attempt id (a UUID) and the sequence ZooKeeper appended (a
 * signed 32-bit counter, printed `%010d`: negative once the parent's counter wraps).
 */
const LOCK_NODE_NAME = new RegExp(
  `^${PROTECTED_PREFIX}([0-9a-f-]{36})${LOCK_NODE_MARKER}(-?\\d+)$`,
);

/** One lock node in a parent's children, parsed. */
export interface LockNode {
  /** The child's name. */
  readonly name: string;
  /** The attempt id in its name. */
  readonly attemptId: string;
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

/** Parses a child name; `undefined` for nodes that are not Baton lock nodes. */
export function parseLockNode(name: string): LockNode | undefined {
  const m = LOCK_NODE_NAME.exec(name);
  if (m === null) return undefined;
  return { name, attemptId: m[1] as string, seq: Number(m[2]) };
}

/** The Baton lock nodes among `children`, in queue order (lowest sequence first). */
export function queueOrder(children: readonly string[]): LockNode[] {
  const nodes: LockNode[] = [];
  for (const child of children) {
    const node = parseLockNode(child);
    if (node !== undefined) nodes.push(node);
  }
  return nodes.sort((a, b) => a.seq - b.seq);
}
