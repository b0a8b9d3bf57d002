import { describe, expect, it } from "vitest";
import {
  decodeAcquire,
  decodeFree,
  decodeHeartbeat,
  decodeHolder,
  decodeReleased,
  FOREIGN_HOLDER,
} from "../src/named-lock-replies.js";

// Replies as mysql2 3.24 gives them from MariaDB 10.11 (big numbers as strings), captured from
// the named-lock statements.
const okPacket = (affectedRows: number, insertId: number | string, serverStatus = 2) => ({
  fieldCount: 0,
  affectedRows,
  insertId,
  info: "",
  serverStatus,
  warningStatus: 0,
  changedRows: affectedRows,
});

describe("named-lock replies", () => {
  it("an acquire that was granted: the counter's new value, kept exact beyond 2^53", () => {
    expect(
      decodeAcquire([
        okPacket(0, 0, 11),
        okPacket(1, "9007199254740994", 11),
        okPacket(1, 0, 11),
        okPacket(0, 0, 2),
      ]),
    ).toBe(9007199254740994n);
    expect(
      decodeAcquire([okPacket(0, 0, 11), okPacket(1, 42, 11), okPacket(2, 0, 11), okPacket(0, 0)]),
    ).toBe(42n);
  });

  it("an acquire of a lock another connection holds: null", () => {
    expect(
      decodeAcquire([okPacket(0, 0, 11), okPacket(0, 0, 11), okPacket(0, 0, 11), okPacket(0, 0)]),
    ).toBeNull();
  });

  it("an acquire reply of another shape is an error, never a grant", () => {
    expect(() => decodeAcquire([{ released: 1 }])).toThrow(/unexpected acquire reply/);
  });

  it("the heartbeat alone, and after the holder rows' deletion", () => {
    expect(decodeHeartbeat([{ id: 52 }])).toBe(52);
    expect(decodeHeartbeat([okPacket(0, 0, 42), [{ id: 52 }]])).toBe(52);
    expect(decodeHeartbeat([okPacket(3, 0, 42), [{ id: "4294967296" }]])).toBe(4294967296);
    expect(() => decodeHeartbeat([okPacket(0, 0, 42)])).toThrow(/unexpected heartbeat reply/);
  });

  it("RELEASE_LOCK: 1 released, 0 held by another connection, NULL held by nobody", () => {
    expect(decodeReleased([{ released: 1 }])).toBe(true);
    expect(decodeReleased([{ released: 0 }])).toBe(false);
    expect(decodeReleased([{ released: null }])).toBe(false);
  });

  it("the wait: 1 when the lock was free, 0 after the timeout, NULL when killed", () => {
    expect(decodeFree([{ free: 1 }])).toBe(true);
    expect(decodeFree([{ free: 0 }])).toBe(false);
    expect(decodeFree([{ free: null }])).toBe(false);
  });

  it("the holder: its row, nobody, or a connection that wrote no row", () => {
    expect(
      decodeHolder([
        { connection_id: 52, owner_id: "own", token: "9007199254740994", value: null },
      ]),
    ).toEqual({ ownerId: "own", token: 9007199254740994n });
    expect(
      decodeHolder([{ connection_id: 52, owner_id: "own", token: "7", value: "10.0.0.7:80" }]),
    ).toEqual({ ownerId: "own", token: 7n, value: "10.0.0.7:80" });
    expect(decodeHolder([])).toBeNull();
    expect(decodeHolder([{ connection_id: 53, owner_id: null, token: null, value: null }])).toEqual(
      { ownerId: "connection 53", token: 0n, foreign: FOREIGN_HOLDER },
    );
  });
});
