/**
 * The data Baton reads from and writes to ZooKeeper nodes: a lock node's data (who holds it,
 * and the value published with the grant), the data of the contenders other libraries create
 * beside Baton's, and the fencing token, read from the node's stat.
 */
import type { NodeLayout } from "./zookeeper-keys.js";

/**
 * A lock node's data is UTF-8 JSON, `{"o":"<owner id>","v":"<value>"}`; `v` only when the
 * grant published a value. Short keys: the data is sent with every create and every holder read.
 * A read entry made by downgrading a write also stores the write's token, `"t":"<decimal>"`.
 */
const OWNER_KEY = "o";
/** See {@link OWNER_KEY}. */
const VALUE_KEY = "v";
/** See {@link OWNER_KEY}. */
const TOKEN_KEY = "t";

/** What a lock node stores: the owner id and the published value. */
export interface NodeData {
  readonly ownerId: string;
  readonly value?: string;
  /** The token a downgraded write's read entry carries. */
  readonly token?: bigint;
}

/** Serialises a lock node's data (see {@link decodeNodeData}). */
export function encodeNodeData(data: NodeData): Buffer {
  const stored: Record<string, string> = { [OWNER_KEY]: data.ownerId };
  if (data.value !== undefined) stored[VALUE_KEY] = data.value;
  if (data.token !== undefined) stored[TOKEN_KEY] = data.token.toString();
  return Buffer.from(JSON.stringify(stored));
}

/**
 * Reads a lock node's data (see {@link encodeNodeData}); `undefined` for data Baton did not
 * write (empty, not JSON, or without a string owner). A value that is not a string is left
 * out.
 */
export function decodeNodeData(buffer: Buffer | undefined | null): NodeData | undefined {
  if (buffer === undefined || buffer === null || buffer.length === 0) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(buffer.toString("utf8"));
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== "object") return undefined;
  const {
    [OWNER_KEY]: owner,
    [VALUE_KEY]: value,
    [TOKEN_KEY]: token,
  } = parsed as Record<string, unknown>;
  if (typeof owner !== "string") return undefined;
  const data: { ownerId: string; value?: string; token?: bigint } = { ownerId: owner };
  if (typeof value === "string") data.value = value;
  if (typeof token === "string" && DECIMAL.test(token)) data.token = BigInt(token);
  return data;
}

/** A token as the data of a node spells it. */
const DECIMAL = /^(0|[1-9]\d{0,18})$/;

/**
 * The data of a permit key's parent node: the token of the key's newest write grant, in
 * decimal (see {@link decodeWriteToken}). Written by each write once it is granted, never
 * deleted, so a later read carries it.
 */
export function encodeWriteToken(token: bigint): Buffer {
  return Buffer.from(token.toString());
}

/**
 * Reads a permit key's newest write token (see {@link encodeWriteToken}); `0n` for a parent
 * no write has been granted on (empty data).
 */
export function decodeWriteToken(buffer: Buffer | undefined | null): bigint {
  if (buffer === undefined || buffer === null || buffer.length === 0) return 0n;
  const text = buffer.toString("utf8");
  return DECIMAL.test(text) ? BigInt(text) : 0n;
}

/** The library whose lock node holds a lock, when it is not Baton. */
export type ForeignLibrary = "curator" | "kazoo";

/** Who a contender is, read from its name's layout and its data. */
export interface ContenderData extends NodeData {
  /** Set when the node is not Baton's: the library whose layout it has. */
  readonly foreign?: ForeignLibrary;
}

/**
 * Reads the data of a contender whose name has `layout` (see zookeeper-keys.ts). A kazoo
 * node's data is its identifier (empty when none was given); a Curator node's is the
 * client's address as text (`127.0.0.1`), or `LeaderSelector`'s id. A foreign node's data,
 * read as UTF-8, is its owner id. A protected name (`_c_<UUID>-lock-`) is Baton's when its
 * data is Baton's JSON, Curator's otherwise.
 */
export function decodeContenderData(
  buffer: Buffer | undefined | null,
  layout: NodeLayout,
): ContenderData {
  if (layout === "protected") {
    const baton = decodeNodeData(buffer);
    if (baton !== undefined) return baton;
  }
  return {
    ownerId: buffer === undefined || buffer === null ? "" : buffer.toString("utf8"),
    foreign: layout === "kazoo" ? "kazoo" : "curator",
  };
}

/**
 * A node's czxid (the zxid of the transaction that created it) as a bigint: the fencing
 * token. ZooKeeper assigns it; node-zookeeper-client gives it as the stat's 8 raw bytes, a
 * signed 64-bit big-endian integer (the leader's epoch in the high 32 bits, a counter in the
 * low 32 bits): a node created later always has a larger one.
 */
export function czxidToken(czxid: Buffer): bigint {
  return czxid.readBigInt64BE(0);
}

/**
 * A node's mzxid (the zxid of the transaction that last changed its data) as a bigint, read
 * as {@link czxidToken} reads the czxid: a semaphore permit's token, taken when it is granted.
 */
export function mzxidToken(mzxid: Buffer): bigint {
  return mzxid.readBigInt64BE(0);
}

/**
 * A revocation node's data (what a forced release tells the holder), UTF-8 JSON:
 * `{"s":"lock","k":"<key>","t":"<token, decimal>","r":"<reason>"}`.
 */
interface StoredRevocation {
  readonly s: "lock" | "permit";
  readonly k: string;
  readonly t: string;
  readonly r: string;
}

/** A revocation, as {@link encodeRevocation} stores it. */
export interface RevocationData {
  readonly space: "lock" | "permit";
  readonly key: string;
  readonly token: bigint;
  readonly reason: string;
}

/** Serialises a revocation node's data (see {@link decodeRevocation}). */
export function encodeRevocation(revocation: RevocationData): Buffer {
  const stored: StoredRevocation = {
    s: revocation.space,
    k: revocation.key,
    t: revocation.token.toString(),
    r: revocation.reason,
  };
  return Buffer.from(JSON.stringify(stored));
}

/** Reads a revocation node's data; `undefined` for data Baton did not write. */
export function decodeRevocation(buffer: Buffer | undefined | null): RevocationData | undefined {
  if (buffer === undefined || buffer === null || buffer.length === 0) return undefined;
  try {
    const { s, k, t, r } = JSON.parse(buffer.toString("utf8")) as Partial<StoredRevocation>;
    if (s !== "lock" && s !== "permit") return undefined;
    if (typeof k !== "string" || typeof r !== "string") return undefined;
    if (typeof t !== "string" || !DECIMAL.test(t)) return undefined;
    return { space: s, key: k, token: BigInt(t), reason: r };
  } catch {
    return undefined;
  }
}

/** A stat's ctime or mtime (ms since the epoch, by the server's clock) as a number. */
export function statTimeMs(time: Buffer): number {
  return Number(time.readBigInt64BE(0));
}
