import { describe, expect, it } from "vitest";
import {
  czxidToken,
  decodeContenderData,
  decodeNodeData,
  decodeRevocation,
  decodeWriteToken,
  encodeNodeData,
  encodeRevocation,
  encodeWriteToken,
  statTimeMs,
} from "../src/zookeeper-codec.js";
import { decodeLockName, encodeLockName, revocationPath } from "../src/zookeeper-keys.js";

/** Bytes read back from a ZooKeeper 3.8 server with node-zookeeper-client (getData). */
const WITH_VALUE = Buffer.from(
  "7b226f223a2262696c6c696e672d37663361222c2276223a2231302e302e302e373a38303830227d",
  "hex",
);
const OWNER_ONLY = Buffer.from("7b226f223a2262696c6c696e672d37663361227d", "hex");

describe("zookeeper lock node data", () => {
  it("encodes the owner id and the value as the server stores them", () => {
    expect(encodeNodeData({ ownerId: "billing-7f3a", value: "10.0.0.7:8080" })).toEqual(WITH_VALUE);
    expect(encodeNodeData({ ownerId: "billing-7f3a" })).toEqual(OWNER_ONLY);
    expect(WITH_VALUE.toString("utf8")).toBe('{"o":"billing-7f3a","v":"10.0.0.7:8080"}');
  });

  it("decodes what the server returns", () => {
    expect(decodeNodeData(WITH_VALUE)).toEqual({ ownerId: "billing-7f3a", value: "10.0.0.7:8080" });
    expect(decodeNodeData(OWNER_ONLY)).toEqual({ ownerId: "billing-7f3a" });
  });

  it("round-trips owner ids and values with quotes, newlines and non-ASCII text", () => {
    const data = { ownerId: 'host "a"\n', value: "Zürich ✓ {}" };
    expect(decodeNodeData(encodeNodeData(data))).toEqual(data);
  });

  it("tells data another client wrote (not Baton's JSON) from Baton's", () => {
    for (const data of [
      Buffer.from("127.0.0.1"),
      Buffer.alloc(0),
      null,
      undefined,
      Buffer.from("null"),
      Buffer.from('"text"'),
      Buffer.from('{"o":5,"v":"x"}'),
    ]) {
      expect(decodeNodeData(data)).toBeUndefined();
    }
    expect(decodeNodeData(Buffer.from('{"o":"a","v":7}'))).toEqual({ ownerId: "a" });
  });
});

/** Data read back from a ZooKeeper 3.8 server, as Curator 5.4 and kazoo 2.8 wrote it. */
const CURATOR_MUTEX = Buffer.from("3132372e302e302e31", "hex");
const CURATOR_SELECTOR = Buffer.from("73656c6563746f722d69642d31", "hex");
const KAZOO_LOCK = Buffer.from("776f726b65722d37", "hex");

describe("zookeeper contender data", () => {
  it("reads a Baton node in the protected layout as Baton's owner and value", () => {
    expect(decodeContenderData(WITH_VALUE, "protected")).toEqual({
      ownerId: "billing-7f3a",
      value: "10.0.0.7:8080",
    });
  });

  it("reads a Curator node in the same layout as Curator's: the client's address or LeaderSelector's id", () => {
    expect(decodeContenderData(CURATOR_MUTEX, "protected")).toEqual({
      ownerId: "127.0.0.1",
      foreign: "curator",
    });
    expect(decodeContenderData(CURATOR_SELECTOR, "protected")).toEqual({
      ownerId: "selector-id-1",
      foreign: "curator",
    });
    expect(decodeContenderData(CURATOR_MUTEX, "curator")).toEqual({
      ownerId: "127.0.0.1",
      foreign: "curator",
    });
  });

  it("reads a kazoo node's identifier as its owner, empty when it gave none", () => {
    expect(decodeContenderData(KAZOO_LOCK, "kazoo")).toEqual({
      ownerId: "worker-7",
      foreign: "kazoo",
    });
    expect(decodeContenderData(Buffer.alloc(0), "kazoo")).toEqual({
      ownerId: "",
      foreign: "kazoo",
    });
    // A kazoo identifier that happens to look like Baton's data is still kazoo's.
    expect(decodeContenderData(OWNER_ONLY, "kazoo")).toEqual({
      ownerId: '{"o":"billing-7f3a"}',
      foreign: "kazoo",
    });
  });
});

describe("zookeeper fencing token", () => {
  it("is the lock node's czxid: the stat's 8 bytes, big-endian", () => {
    // czxid of the two nodes above, as node-zookeeper-client returned them.
    expect(czxidToken(Buffer.from("000000000000000b", "hex"))).toBe(11n);
    expect(czxidToken(Buffer.from("000000000000000d", "hex"))).toBe(13n);
  });

  it("orders a node created under a new leader after every node of the old one", () => {
    // A zxid is the leader's epoch (high 32 bits) and a counter (low 32 bits).
    const lastOfEpoch1 = czxidToken(Buffer.from("00000001ffffff00", "hex"));
    const firstOfEpoch2 = czxidToken(Buffer.from("0000000200000001", "hex"));
    expect(lastOfEpoch1).toBe(0x1_ffff_ff00n);
    expect(firstOfEpoch2).toBe(0x2_0000_0001n);
    expect(firstOfEpoch2).toBeGreaterThan(lastOfEpoch1);
  });
});

describe("zookeeper permit data", () => {
  it("stores a downgraded write's token with the read entry's owner and value", () => {
    const data = encodeNodeData({ ownerId: "catalog-1", value: "v", token: 4294967299n });
    expect(data.toString("utf8")).toBe('{"o":"catalog-1","v":"v","t":"4294967299"}');
    expect(decodeNodeData(data)).toEqual({ ownerId: "catalog-1", value: "v", token: 4294967299n });
    // A token that is not a decimal is left out, as a value that is not a string is.
    expect(decodeNodeData(Buffer.from('{"o":"a","t":"0x10"}'))).toEqual({ ownerId: "a" });
    expect(decodeNodeData(Buffer.from('{"o":"a","t":17}'))).toEqual({ ownerId: "a" });
  });

  it("keeps the newest write token as the permit parent's data, in decimal; none is 0", () => {
    // The largest czxid: epoch 2^31-1, counter 2^32-1.
    const token = 9223372036854775807n;
    expect(encodeWriteToken(token).toString("utf8")).toBe("9223372036854775807");
    expect(decodeWriteToken(encodeWriteToken(token))).toBe(token);
    expect(decodeWriteToken(encodeWriteToken(0n))).toBe(0n);
    // A parent created by the first entry's create has no data.
    expect(decodeWriteToken(Buffer.alloc(0))).toBe(0n);
    expect(decodeWriteToken(null)).toBe(0n);
    expect(decodeWriteToken(Buffer.from("-5"))).toBe(0n);
  });
});

describe("zookeeper inspection's data", () => {
  it("a revocation node carries space, key, token and reason as short-keyed JSON", () => {
    const revocation = {
      space: "permit" as const,
      key: "pool",
      token: 4294967302n,
      reason: "drain",
    };
    expect(encodeRevocation(revocation).toString()).toBe(
      '{"s":"permit","k":"pool","t":"4294967302","r":"drain"}',
    );
    expect(decodeRevocation(encodeRevocation(revocation))).toEqual(revocation);
    for (const raw of [
      "",
      "x",
      '{"s":"lock","k":"a","t":"01","r":"r"}',
      '{"s":"x","k":"a","t":"1","r":"r"}',
    ]) {
      expect(decodeRevocation(Buffer.from(raw)), raw).toBeUndefined();
    }
  });

  it("a stat's ctime is ms since the epoch, 8 bytes big-endian", () => {
    // 2026-12-06T12:00:00.000Z, as a stat's ctime arrives.
    expect(statTimeMs(Buffer.from("000001a24b39aa00", "hex"))).toBe(1_796_558_400_000);
  });

  it("lock names decode back from their node names; a revocation node is named after the held path", () => {
    for (const name of ["a/b", "..", "café %2F"])
      expect(decodeLockName(encodeLockName(name))).toBe(name);
    expect(decodeLockName("%E0%A4%A")).toBeUndefined();
    expect(revocationPath("/baton-revoked", "/baton/a%2Fb/_c_x-lock-0000000001")).toBe(
      "/baton-revoked/%2Fbaton%2Fa%252Fb%2F_c_x-lock-0000000001",
    );
  });
});
