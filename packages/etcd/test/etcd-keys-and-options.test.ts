import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { ConfigError, parseBackendUrl } from "@baton/core";
import { describe, expect, it } from "vitest";
import {
  isQueueKey,
  leaseHex,
  lockPrefix,
  permitEntriesPrefix,
  permitEntryKey,
  permitLimitKey,
  permitPrefix,
  permitTokenKey,
  queueKey,
  rangeEnd,
  recordKey,
} from "../src/etcd-keys.js";
import { etcdOptionsFromUrl, resolveEtcdOptions } from "../src/etcd-options.js";
import { leaseSeconds } from "../src/lease-ttl.js";

describe("etcd key layout and options (no server)", () => {
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

  it("keeps records at <prefix>records:<key>, outside every lock's keys and ranges", () => {
    const key = "nightly/slot/2026-12-01T02:00:00Z";
    expect(recordKey("", key).toString()).toBe("records:nightly%2Fslot%2F2026-12-01T02:00:00Z");
    expect(recordKey("locks/", "a%2Fb").toString()).toBe("locks/records:a%252Fb");
    // Escaping keeps record keys apart: `a/b` and `a%2Fb` are two records.
    expect(recordKey("", "a/b").equals(recordKey("", "a%2Fb"))).toBe(false);
    // No lock name reaches a record key: its name would end at a `/` after the prefix.
    for (const prefix of ["", "locks/"]) {
      const record = recordKey(prefix, key);
      for (const name of ["records", "records:nightly", `records:${key}`, "records/nightly/slot"]) {
        const lock = lockPrefix(prefix, name);
        const inRange = record.subarray(0, lock.length).equals(lock);
        expect(inRange || isQueueKey(lock, record), `${prefix}${name}`).toBe(false);
      }
    }
  });

  it("keeps permit keys under <prefix>\\xffpermits:<name>\\xff, outside every lock's and record's", () => {
    const base = permitPrefix("locks/", "exports");
    expect(base).toEqual(Buffer.from("locks/\xffpermits:exports\xff", "latin1"));
    const entries = permitEntriesPrefix(base);
    expect(permitEntryKey(entries, "1a2b", 7).subarray(base.length).toString()).toBe("e:1a2b.7");
    expect(permitLimitKey(base).subarray(base.length).toString()).toBe("limit");
    expect(permitTokenKey(base).subarray(base.length).toString()).toBe("token");
    // No name's range holds another's: the name ends at the second 0xff.
    const inRange = (key: Buffer, range: Buffer) => key.subarray(0, range.length).equals(range);
    expect(inRange(permitPrefix("", "a:b"), permitPrefix("", "a"))).toBe(false);
    expect(inRange(permitPrefix("", "a\xff"), permitPrefix("", "a"))).toBe(false);
    // No lock key (`<prefix><name>/...`) nor record key lies in a permit key's range, and no
    // permit key under a lock's range: a name's UTF-8 never holds the byte 0xff.
    for (const name of ["exports", "permits:exports", "\xffpermits:exports\xff", "ÿ"]) {
      const lock = queueKey(lockPrefix("locks/", name), "1a2b");
      expect(inRange(lock, base), name).toBe(false);
      expect(inRange(recordKey("locks/", name), base), name).toBe(false);
      expect(inRange(permitEntryKey(entries, "1a2b", 0), lockPrefix("locks/", name)), name).toBe(
        false,
      );
    }
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

  it("reads TLS from ?tls= and the PEM files ?ca=, ?cert=, ?key=", () => {
    const pem = join(tmpdir(), `baton-etcd-options-${process.pid}.pem`);
    writeFileSync(pem, "-----BEGIN CERTIFICATE-----\n");
    const fromUrl = (url: string) => etcdOptionsFromUrl(parseBackendUrl(url));
    expect(fromUrl("etcd://a?tls=true")).toEqual({ hosts: ["a:2379"], tls: true });
    expect(fromUrl("etcd://a?tls=false")).toEqual({ hosts: ["a:2379"] });
    const files = fromUrl(
      `etcd://a?ca=${encodeURIComponent(pem)}&cert=${encodeURIComponent(pem)}&key=${encodeURIComponent(pem)}`,
    ).tls as { ca: Buffer; cert: Buffer; key: Buffer };
    expect(files.ca.toString()).toContain("BEGIN CERTIFICATE");
    expect(Object.keys(files).sort()).toEqual(["ca", "cert", "key"]);
    for (const [url, message] of [
      ["etcd://a?tls=maybe", /"tls" must be true or false/],
      ["etcd://a?ca=/no/such/ca.pem", /"ca" names a file that cannot be read/],
      [`etcd://a?tls=false&ca=${encodeURIComponent(pem)}`, /tls=false" and TLS files/],
      ["etcd://a?prefx=x", /unknown etcd URL parameter "prefx"/],
      ["etcd://user@a", /both a user name and a password/],
    ] as const) {
      let error: unknown;
      try {
        fromUrl(url);
      } catch (e) {
        error = e;
      }
      expect(error, url).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message, url).toMatch(message);
    }
    // Turning TLS on makes every endpoint https://; plain http:// then is a mistake.
    const secured = resolveEtcdOptions({ hosts: ["a:2379"], tls: true });
    const pool = (secured.client as unknown as { pool: { options: { hosts: string[] } } }).pool;
    expect(pool.options.hosts).toEqual(["https://a:2379"]);
    void secured.client.close();
    expect(() => resolveEtcdOptions({ hosts: ["http://a:2379"], tls: true })).toThrow(/plain http/);
    expect(() => resolveEtcdOptions({ hosts: ["a"], tls: { cert: Buffer.from("x") } })).toThrow(
      ConfigError,
    );
  });

  it("reads credentials by WHATWG rules and never prints them in an error", () => {
    expect(etcdOptionsFromUrl(parseBackendUrl("etcd://root:pa@ss@a:1,b:2"))).toMatchObject({
      hosts: ["a:1", "b:2"],
      username: "root",
      password: "pa@ss",
    });
    for (const url of [
      "etcd://root:hunter2@a/x",
      "etcd://root:hunter2@a?prefx=1",
      "etcd://root:hunter2@a:0",
      "etcd://root:hunter2/x@a",
      "etcd://root:hunter2@a?requestTimeoutMs=x",
    ]) {
      let error: unknown;
      try {
        etcdOptionsFromUrl(parseBackendUrl(url));
      } catch (e) {
        error = e;
      }
      expect(error, url).toBeInstanceOf(ConfigError);
      expect(inspect(error, { depth: 10 }), url).not.toContain("hunter2");
    }
  });
});
