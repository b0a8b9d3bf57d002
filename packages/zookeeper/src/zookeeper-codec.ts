/**
 * The data Baton reads from and writes to ZooKeeper nodes: a lock node's data (who holds it,
 * and the value published with the grant) and the fencing token, read from the node's stat.
 */

/**
 * A lock node's data is UTF-8 JSON, `{"o":"<owner id>","v":"<value>"}`; `v` only when the
 * grant published a value. Short keys: the data is sent with every create and every holder read.
 */
const OWNER_KEY = "o";
/** See {@link OWNER_KEY}. */
const VALUE_KEY = "v";

/** What a lock node stores: the owner id and the published value. */
export interface NodeData {
  readonly ownerId: string;
  readonly value?: string;
}

/** Serialises a lock node's data (see {@link decodeNodeData}). */
export function encodeNodeData(data: NodeData): Buffer {
  const stored: Record<string, string> = { [OWNER_KEY]: data.ownerId };
  if (data.value !== undefined) stored[VALUE_KEY] = data.value;
  return Buffer.from(JSON.stringify(stored));
}

/**
 * Reads a lock node's data (see {@link encodeNodeData}). Data Baton did not write (empty, not
 * JSON, or without a string owner) gives an empty owner id; a value that is not a string is
 * left out.
 */
export function decodeNodeData(buffer: Buffer | undefined | null): NodeData {
  if (buffer === undefined || buffer === null || buffer.length === 0) return NO_OWNER;
  let parsed: unknown;
  try {
    parsed = JSON.parse(buffer.toString("utf8"));
  } catch {
    return NO_OWNER;
  }
  if (parsed === null || typeof parsed !== "object") return NO_OWNER;
  const { [OWNER_KEY]: owner, [VALUE_KEY]: value } = parsed as Record<string, unknown>;
  const ownerId = typeof owner === "string" ? owner : "";
  return typeof value === "string" ? { ownerId, value } : { ownerId };
}

const NO_OWNER: NodeData = { ownerId: "" };

/**
 * A node's czxid (the zxid of the transaction that created it) as a bigint: the fencing
 * token. ZooKeeper assigns it; node-zookeeper-client gives it as the stat's 8 raw bytes, a
 * signed 64-bit big-endian integer (the leader's epoch in the high 32 bits, a counter in the
 * low 32 bits): a node created later always has a larger one.
 */
export function czxidToken(czxid: Buffer): bigint {
  return czxid.readBigInt64BE(0);
}
