import { describe, expect, it } from "vitest";
import {
  decodeHeartbeatTtl,
  decodeHolder,
  decodeLockMetadata,
  decodeRecordVersion,
  decodeRevocationNotes,
  encodeHeartbeat,
  encodeLockBody,
  encodeLockMetadata,
  encodeRevocationNote,
  revocationName,
} from "../src/azure-blob-codec.js";
import {
  escapeName,
  lockBlobName,
  recordBlobName,
  sessionBlobName,
} from "../src/azure-blob-keys.js";

describe("azure-blob codec", () => {
  it("lock metadata round-trips the counter and the session, as Azure returns it", () => {
    const meta = encodeLockMetadata({ token: 18446744073709551615n, session: "3f0c-ab" });
    expect(meta).toEqual({ batontoken: "18446744073709551615", batonsession: "3f0c-ab" });
    expect(decodeLockMetadata(meta)).toEqual({ token: 18446744073709551615n, session: "3f0c-ab" });
  });

  it("a blob another tool wrote reads as counter 0 and no session", () => {
    expect(decodeLockMetadata(undefined)).toEqual({ token: 0n, session: "" });
    expect(decodeLockMetadata({ batontoken: "-1", other: "x" })).toEqual({
      token: 0n,
      session: "",
    });
  });

  it("the lock body carries any owner id and value, the token comes from the metadata", () => {
    const body = encodeLockBody("owner-\u00e9-\u{1F600}", "host:8080\nline");
    expect(body.toString()).toBe('{"baton":1,"owner":"owner-é-😀","value":"host:8080\\nline"}');
    expect(decodeHolder(body, { token: 7n, session: "s" })).toEqual({
      ownerId: "owner-é-😀",
      token: 7n,
      value: "host:8080\nline",
    });
    expect(decodeHolder(encodeLockBody("a", undefined), { token: 1n, session: "s" })).toEqual({
      ownerId: "a",
      token: 1n,
    });
  });

  it("a body Baton did not write shows no holder", () => {
    const meta = { token: 1n, session: "s" };
    expect(decodeHolder(Buffer.alloc(0), meta)).toBeNull();
    expect(decodeHolder(Buffer.from('{"owner":"x"}'), meta)).toBeNull();
    expect(decodeHolder(Buffer.from("not json"), meta)).toBeNull();
  });

  it("a heartbeat declares its TTL; a missing or bad one falls back", () => {
    expect(encodeHeartbeat(2_000, 3)).toEqual({ batonttlms: "2000", batonbeat: "3" });
    expect(decodeHeartbeatTtl({ batonttlms: "2000", batonbeat: "3" }, 9)).toBe(2_000);
    expect(decodeHeartbeatTtl({}, 9)).toBe(9);
    expect(decodeHeartbeatTtl({ batonttlms: "0" }, 9)).toBe(9);
    expect(decodeHeartbeatTtl({ batonttlms: "1e3" }, 9)).toBe(9);
  });

  it("record versions are ETags as Azure sends them; anything else matches no blob", () => {
    expect(decodeRecordVersion('"0x8DC5A1B2C3D4E5F"')).toBe('"0x8DC5A1B2C3D4E5F"');
    expect(decodeRecordVersion("")).toBeUndefined();
    expect(decodeRecordVersion("*")).toBeUndefined();
  });
});

describe("azure-blob keys", () => {
  it("escapes every character that could make a folder, a dot ending or a collision", () => {
    expect(escapeName("jobs/nightly.v2")).toBe("jobs%2Fnightly%2Ev2");
    expect(escapeName("a b~*")).toBe("a%20b%7E%2A");
    expect(escapeName("e\u0301")).not.toBe(escapeName("\u00e9"));
    expect(escapeName("x%2F")).toBe("x%252F");
    expect(escapeName("x%2F")).not.toBe(escapeName("x/"));
  });

  it("locks, sessions and records live in folders of their own under the prefix", () => {
    expect(lockBlobName("app/", "a/b")).toBe("app/locks/a%2Fb");
    expect(sessionBlobName("app/", "9b2e")).toBe("app/sessions/9b2e");
    expect(recordBlobName("", "job/slot/1")).toBe("records/job%2Fslot%2F1");
  });

  it("a forced release's note on a heartbeat: an identifier name, an ASCII value, read back by the holder", () => {
    const note = { key: "a/b", token: 7n, reason: "stuck: «deploy»" };
    expect(revocationName("a/b", 7n)).toBe("batonrevoked_c14cddc033f64b9d_7");
    expect(encodeRevocationNote(note)).toBe(
      "eyJrIjoiYS9iIiwidCI6IjciLCJyIjoic3R1Y2s6IMKrZGVwbG95wrsifQ",
    );
    // A heartbeat's metadata as a HEAD returns it after the note was added.
    const metadata = {
      batonttlms: "2000",
      batonbeat: "3",
      batonrevoked_c14cddc033f64b9d_7: "eyJrIjoiYS9iIiwidCI6IjciLCJyIjoic3R1Y2s6IMKrZGVwbG95wrsifQ",
      batonrevoked_0000000000000000_1: "not a note",
    };
    expect(decodeRevocationNotes(metadata)).toEqual([note]);
    expect(decodeRevocationNotes({ batonttlms: "2000", batonbeat: "4" })).toEqual([]);
  });
});
