import { describeBackend } from "@baton/conformance/harness";
import { describe, expect, it } from "vitest";
import { demoTtl } from "../src/demo/demo-ttl.js";
import { runMain } from "./support/run-main.js";

describeBackend("etcd", (url) => {
  it("baton demo runs on etcd with its default --ttl (etcd leases are whole seconds)", async () => {
    const { code, out, err } = await runMain(["demo", "--backend", url]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(out).toContain("TTL 2000 ms");
    expect(out).not.toContain("refused");
  }, 180_000);

  it("the default lease is the next whole second the store grants", async () => {
    expect(await demoTtl(url, 800)).toBe(2_000);
    expect(await demoTtl(url, 3_000)).toBe(3_000);
  });
});

describe("baton demo's default lease on the memory backend", () => {
  it("stays short where the store grants any length", async () => {
    expect(await demoTtl("memory://", 800)).toBe(800);
  });
});
