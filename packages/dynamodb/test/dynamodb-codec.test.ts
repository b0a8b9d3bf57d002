import { BackendUnavailableError } from "@baton/core";
import { describe, expect, it } from "vitest";
import {
  decodeGrantedToken,
  decodeLock,
  decodeRecord,
  decodeRecordVersion,
  decodeRevocations,
  decodeSession,
  encodeRevocation,
  encodeSession,
  revocationAttribute,
} from "../src/dynamodb-codec.js";
import { lockKey, recordKey, sessionKey } from "../src/dynamodb-keys.js";
import { grantRequest, releaseRequest, renewRequest } from "../src/lock-requests.js";

// Items below are what dynalite 4.0.0 returned (GetItem, UpdateItem) for the adapter's own
// writes through @aws-sdk/client-dynamodb 3.1169.
const SESSION = "8803a35e-9ecf-4e40-b473-22fe05ad00a6";
const heldLock = {
  pk: { S: "lock:invoices" },
  session: { S: SESSION },
  owner: { S: "worker-1" },
  value: { S: "10.0.0.7:8080" },
  token: { N: "1" },
};
const releasedLock = { pk: { S: "lock:invoices" }, token: { N: "1" } };
const sessionItem = {
  pk: { S: `session:${SESSION}` },
  owner: { S: "worker-1" },
  beat: { N: "1" },
  ttlMs: { N: "5000" },
};
const recordItem = {
  pk: { S: "record:job/2026-12-01" },
  value: { S: '{"v":1}' },
  version: { N: "1" },
};
const grantReply = { session: { S: "x" }, owner: { S: "y" }, token: { N: "2" } };

describe("dynamodb codec", () => {
  it("decodes a held lock item: session, owner, token and published value", () => {
    expect(decodeLock(heldLock)).toEqual({
      session: SESSION,
      ownerId: "worker-1",
      token: 1n,
      value: "10.0.0.7:8080",
    });
  });

  it("decodes a released lock item as free, keeping its counter; no item is free too", () => {
    expect(decodeLock(releasedLock)).toEqual({ token: 1n });
    expect(decodeLock(undefined)).toEqual({});
  });

  it("decodes a session item, and encodes the one a session opens with", () => {
    expect(decodeSession(sessionItem)).toEqual({ ownerId: "worker-1", beat: "1", ttlMs: 5000 });
    expect(decodeSession(undefined)).toBeUndefined();
    expect(encodeSession(`session:${SESSION}`, "worker-1", 5000)).toEqual(sessionItem);
  });

  it("decodes the token of a grant's UPDATED_NEW reply, past 2^53 exactly", () => {
    expect(decodeGrantedToken(grantReply)).toBe(2n);
    expect(decodeGrantedToken({ token: { N: "9007199254740993" } })).toBe(9007199254740993n);
  });

  it("decodes a record item, and reads versions only in the form writes give them", () => {
    expect(decodeRecord(recordItem)).toEqual({ value: '{"v":1}', version: "1" });
    expect(decodeRecord(undefined)).toBeUndefined();
    expect(decodeRecordVersion("12")).toBe(12n);
    for (const bad of ["", "0", "01", "-1", "1.5", "abc", "1".repeat(39)]) {
      expect(decodeRecordVersion(bad)).toBeUndefined();
    }
  });

  it("an item that Baton did not write is an inconsistent answer, never a holder", () => {
    expect(() => decodeLock({ ...heldLock, owner: { N: "1" } })).toThrow(BackendUnavailableError);
    expect(() => decodeLock({ ...heldLock, token: { S: "1" } })).toThrow(/"token"/);
    expect(() => decodeSession({ ...sessionItem, ttlMs: { N: "0" } })).toThrow(
      BackendUnavailableError,
    );
    expect(() => decodeGrantedToken(undefined)).toThrow(BackendUnavailableError);
  });

  it("keys keep locks, sessions and records apart under one prefix", () => {
    expect(lockKey("app/", "invoices")).toBe("app/lock:invoices");
    expect(sessionKey("app/", SESSION)).toBe(`app/session:${SESSION}`);
    expect(recordKey("app/", "lock:invoices")).toBe("app/record:lock:invoices");
  });

  it("the grant raises the counter in the same conditional write that sets the holder", () => {
    const free = grantRequest("locks", "lock:a", SESSION, "w1", undefined, { free: true });
    expect(free.UpdateExpression).toBe(
      "SET #session = :me, #owner = :owner ADD #token :one REMOVE #value",
    );
    expect(free.ConditionExpression).toBe("attribute_not_exists(#session) OR #session = :me");
    expect(free.ReturnValues).toBe("UPDATED_NEW");
    const takeover = grantRequest("locks", "lock:a", SESSION, "w1", "v", { session: "dead" });
    expect(takeover.ConditionExpression).toBe("#session = :dead");
    expect(takeover.ExpressionAttributeValues?.[":dead"]).toEqual({ S: "dead" });
    expect(takeover.UpdateExpression).toContain("#value = :value");
    const release = releaseRequest("locks", "lock:a", SESSION, 7n);
    expect(release.ConditionExpression).toBe("#session = :me AND #token = :token");
    expect(release.ExpressionAttributeValues?.[":token"]).toEqual({ N: "7" });
    const renew = renewRequest("locks", `session:${SESSION}`, [], 1_800_000_000_123);
    expect(renew.UpdateExpression).toBe("SET #at = :now ADD #beat :one");
    expect(renew.ExpressionAttributeValues?.[":now"]).toEqual({ N: "1800000000123" });
  });

  it("a forced release's note on a session item, as the holder's renewal returns it (ALL_NEW)", () => {
    expect(revocationAttribute("jobs/a", 12n)).toBe("revoked:12:jobs/a");
    expect(encodeRevocation("jobs/a", 12n, "stuck")).toEqual({
      M: { key: { S: "jobs/a" }, token: { N: "12" }, reason: { S: "stuck" } },
    });
    const renewed = {
      pk: { S: `session:${SESSION}` },
      owner: { S: "worker-1" },
      beat: { N: "5" },
      ttlMs: { N: "2000" },
      renewedAt: { N: "1800000000123" },
      "revoked:12:jobs/a": {
        M: { key: { S: "jobs/a" }, token: { N: "12" }, reason: { S: "stuck" } },
      },
      "revoked:bad": { S: "not a note" },
    };
    expect(decodeRevocations(renewed)).toEqual([
      { attribute: "revoked:12:jobs/a", key: "jobs/a", token: 12n, reason: "stuck" },
    ]);
    expect(decodeSession(renewed)).toEqual({
      ownerId: "worker-1",
      beat: "5",
      ttlMs: 2000,
      renewedAt: 1_800_000_000_123,
    });
    const renew = renewRequest("locks", `session:${SESSION}`, ["revoked:12:jobs/a"]);
    expect(renew.UpdateExpression).toBe("SET #at = :now ADD #beat :one REMOVE #r0");
    expect(renew.ExpressionAttributeNames?.["#r0"]).toBe("revoked:12:jobs/a");
    expect(renew.ReturnValues).toBe("ALL_NEW");
  });
});
