/**
 * Names and contents of lock nodes. A lock is a persistent parent node per lock name; every
 * acquisition adds one EPHEMERAL_SEQUENTIAL child named `_c_<attempt id>-lock-<sequence>`.
 * The attempt id (Curator's "protected" mode) lets a retry find the node a lost reply created.
 */

const NODE_PATTERN = /^_c_([0-9a-f-]{36})-lock-(-?\d+)$/;

/** One lock node in a parent's children, parsed. */
export interface LockNode {
  /** The child's name. */
  readonly name: string;
  /** The attempt id in its name. */
  readonly attemptId: string;
  /** ZooKeeper's sequence suffix (queue order within one parent incarnation). */
  readonly seq: number;
}

/** The name prefix of a node created by attempt `attemptId`; ZooKeeper appends the sequence. */
export function nodePrefix(attemptId: string): string {
  return `_c_${attemptId}-lock-`;
}

/** Parses a child name; `undefined` for nodes that are not Baton lock nodes. */
export function parseNode(name: string): LockNode | undefined {
  const m = NODE_PATTERN.exec(name);
  if (m === null) return undefined;
  return { name, attemptId: m[1] as string, seq: Number(m[2]) };
}

/** The Baton lock nodes among `children`, in queue order (lowest sequence first). */
export function queueOrder(children: readonly string[]): LockNode[] {
  const nodes: LockNode[] = [];
  for (const child of children) {
    const node = parseNode(child);
    if (node !== undefined) nodes.push(node);
  }
  return nodes.sort((a, b) => a.seq - b.seq);
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

/** What a lock node stores: the owner id and the published value. */
export interface NodeData {
  readonly ownerId: string;
  readonly value?: string;
}

/** Serialises a lock node's data. */
export function encodeNodeData(data: NodeData): Buffer {
  return Buffer.from(
    JSON.stringify(
      data.value === undefined ? { o: data.ownerId } : { o: data.ownerId, v: data.value },
    ),
  );
}

/** Reads a lock node's data; unknown contents give an empty owner id. */
export function decodeNodeData(buffer: Buffer | undefined | null): NodeData {
  if (buffer === undefined || buffer === null || buffer.length === 0) return { ownerId: "" };
  try {
    const parsed = JSON.parse(buffer.toString("utf8")) as { o?: unknown; v?: unknown };
    const ownerId = typeof parsed.o === "string" ? parsed.o : "";
    return typeof parsed.v === "string" ? { ownerId, value: parsed.v } : { ownerId };
  } catch {
    return { ownerId: "" };
  }
}

/** A node's czxid (8-byte big-endian signed integer) as a bigint: the fencing token. */
export function czxidToken(czxid: Buffer): bigint {
  return czxid.readBigInt64BE(0);
}
