import { describe, expect, it } from "vitest";
import { ConfigError, createCoordinator, declareBackendPackage } from "../src/index.js";
import { configErrorOf, rejectionOf } from "./fakes/helpers.js";
import { ScriptedBackend } from "./fakes/scripted-backend.js";

describe("backend and url", () => {
  it("both backend and url is a ConfigError(backend)", () => {
    const backend = new ScriptedBackend();
    const error = configErrorOf({ backend, url: "memory://" });
    expect(error.field).toBe("backend");
    expect(error.message).toMatch(/exactly one of `backend`.*and `url`/);
    expect(backend.calls.openSession).toBe(0);
  });

  it("neither backend nor url is a ConfigError(backend)", () => {
    const error = configErrorOf({ ttlMs: 1_000 });
    expect(error.field).toBe("backend");
    expect(error.message).toMatch(/exactly one of/);
  });

  it("an empty or blank url is a ConfigError(url) with an example", () => {
    for (const url of ["", "   "]) {
      const error = configErrorOf({ url });
      expect(error.field).toBe("url");
      expect(error.message).toMatch(/redis:\/\/host:6379/);
    }
  });

  it("a url that is not a string is a ConfigError(url)", () => {
    expect(configErrorOf({ url: 6379 }).field).toBe("url");
  });

  it("a string that is not a URL is a ConfigError(url) quoting it", () => {
    const error = configErrorOf({ url: "not a url" });
    expect(error.field).toBe("url");
    expect(error.message).toMatch(/"not a url" is not a URL of the form scheme:\/\/host:port/);
  });

  it("multi-host URLs of the documented forms are accepted without I/O", () => {
    // DESIGN "Config by URL": redlock://h1:6379,h2:6379,..., etcd://h1:2379,h2:2379,
    // zookeeper://h1:2181,h2:2181/chroot. The adapter is loaded on first use, not here.
    for (const url of [
      "etcd://h1:2379,h2:2379,h3:2379",
      "zookeeper://h1:2181,h2:2181/chroot",
      "redlock://h1:6379,h2:6379,h3:6379",
    ]) {
      expect(() => createCoordinator({ url }), url).not.toThrow();
    }
  });

  it("a URL's password is not echoed in the error", () => {
    const error = configErrorOf({ url: "redis://user:hunter2@[bad" });
    expect(error.field).toBe("url");
    expect(error.message).not.toContain("hunter2");
  });

  it("an unknown scheme is a ConfigError(url) naming it and the schemes there are", () => {
    const error = configErrorOf({ url: "mongodb://db:27017" });
    expect(error.field).toBe("url");
    expect(error.message).toMatch(/unknown scheme "mongodb:"/);
    for (const scheme of ["redis://", "etcd://", "zookeeper://", "postgres://", "memory://"]) {
      expect(error.message).toContain(scheme);
    }
  });

  it("a missing adapter package is a ConfigError(url) naming it, on first acquire", async () => {
    // A scheme served by a package that is not installed (as @baton/etcd would be, without it).
    declareBackendPackage("acme-missing", "@acme/baton-missing-adapter", "monotonic");
    // No I/O at construction: the adapter is loaded lazily.
    const coordinator = createCoordinator({ url: "acme-missing://127.0.0.1:2379", ttlMs: 5_000 });
    const error = await rejectionOf(coordinator.acquire("jobs", { waitMs: 0 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ field: "url" });
    expect((error as Error).message).toContain("@acme/baton-missing-adapter");
    expect((error as Error).message).toMatch(/npm install @acme\/baton-missing-adapter/);
    await expect(coordinator.backend()).rejects.toBeInstanceOf(ConfigError);
  });
});
