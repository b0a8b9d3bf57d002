import { ConfigError, parseBackendUrl } from "@baton/core";
import { describe, expect, it } from "vitest";
import { etcdOptionsFromUrl } from "../src/etcd-options.js";
import { decodeHolder, encodeHolderValue } from "../src/holder-value.js";
import { leaseSeconds } from "../src/lease-ttl.js";
import { isQueueKey, leaseHex, lockPrefix, queueKey, rangeEnd } from "../src/lock-keys.js";

describe("etcd key layout, holder values and options (no server)", () => {
  it("lays keys out as <prefix><name>/<lease hex> and ranges over exactly that prefix", () => {
    const prefix = lockPrefix("", "jobs/invoices");
    expect(queueKey(prefix, leaseHex("7587881234567890123")).toString()).toBe(
      `jobs/invoices/${(7587881234567890123n).toString(16)}`,
    );
    expect(rangeEnd(Buffer.from("a/")).toString()).toBe("a0");
    expect(rangeEnd(Buffer.from([0x61, 0xff]))).toEqual(Buffer.from([0x62]));
    expect(rangeEnd(Buffer.from([0xff]))).toEqual(Buffer.from([0]));
    expect(isQueueKey(Buffer.from("a/"), Buffer.from("a/694da226e3b06005"))).toBe(true);
    expect(isQueueKey(Buffer.from("a/"), Buffer.from("a/b/694da226e3b06005"))).toBe(false);
    expect(isQueueKey(Buffer.from("a/"), Buffer.from("a/"))).toBe(false);
    expect(lockPrefix("locks/", "x").toString()).toBe("locks/x/");
  });

  it("stores owner and value as JSON, and shows foreign keys by lease", () => {
    expect(decodeHolder(encodeHolderValue("o", "v"), 5n, "ab")).toEqual({
      ownerId: "o",
      token: 5n,
      value: "v",
    });
    expect(decodeHolder(encodeHolderValue("o", undefined), 5n, "ab")).toEqual({
      ownerId: "o",
      token: 5n,
    });
    expect(decodeHolder(Buffer.from(""), 9n, "ab")).toEqual({
      ownerId: "etcd-lease:ab",
      token: 9n,
    });
    expect(decodeHolder(Buffer.from('{"baton":1,oops'), 9n, "ab")).toEqual({
      ownerId: "etcd-lease:ab",
      token: 9n,
      value: '{"baton":1,oops',
    });
  });

  it("accepts whole-second TTLs from 2 s only", () => {
    expect(leaseSeconds(2_000)).toBe(2);
    expect(leaseSeconds(15_000)).toBe(15);
    for (const bad of [0, 1_000, 1_999, 2_001, 2_500, Number.NaN]) {
      expect(() => leaseSeconds(bad)).toThrow(ConfigError);
    }
  });

  it("reads hosts (default port 2379, IPv6 in brackets), credentials and parameters from URLs", () => {
    expect(etcdOptionsFromUrl(parseBackendUrl("etcd://a,b:2380,[::1]:2381"))).toEqual({
      hosts: ["a:2379", "b:2380", "[::1]:2381"],
    });
    expect(
      etcdOptionsFromUrl(
        parseBackendUrl("etcd://u:p%40ss@a:1/?prefix=locks%2F&requestTimeoutMs=2000"),
      ),
    ).toEqual({
      hosts: ["a:1"],
      username: "u",
      password: "p@ss",
      prefix: "locks/",
      requestTimeoutMs: 2000,
    });
    for (const bad of ["etcd://", "etcd://a/x", "etcd://a?ttl=1", "etcd://a?requestTimeoutMs="]) {
      expect(() => etcdOptionsFromUrl(parseBackendUrl(bad))).toThrow(ConfigError);
    }
  });
});
