import { describe, expect, it } from "vitest";
import { czxidToken, decodeNodeData, encodeNodeData } from "../src/zookeeper-codec.js";

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

  it("reads data another client wrote (not Baton's JSON) as an empty owner", () => {
    // Curator's InterProcessMutex stores the client's address as plain text.
    expect(decodeNodeData(Buffer.from("127.0.0.1"))).toEqual({ ownerId: "" });
    expect(decodeNodeData(Buffer.alloc(0))).toEqual({ ownerId: "" });
    expect(decodeNodeData(null)).toEqual({ ownerId: "" });
    expect(decodeNodeData(undefined)).toEqual({ ownerId: "" });
    expect(decodeNodeData(Buffer.from("null"))).toEqual({ ownerId: "" });
    expect(decodeNodeData(Buffer.from('"text"'))).toEqual({ ownerId: "" });
    expect(decodeNodeData(Buffer.from('{"o":5,"v":"x"}'))).toEqual({ ownerId: "", value: "x" });
    expect(decodeNodeData(Buffer.from('{"o":"a","v":7}'))).toEqual({ ownerId: "a" });
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
