import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigError,
  type Coordinator,
  createCoordinator,
  ManualClock,
  MemoryBackend,
  type MemoryBackendOptions,
  MemoryStore,
  memoryOptionsFromUrl,
  parseBackendUrl,
} from "../../src/index.js";

const open: Coordinator[] = [];
function coordinatorOn(backend: MemoryBackend): Coordinator {
  const coordinator = createCoordinator({ backend, ttlMs: 60_000 });
  open.push(coordinator);
  return coordinator;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

function fromUrl(url: string): MemoryBackendOptions {
  return memoryOptionsFromUrl(parseBackendUrl(url));
}

function configErrorFrom(build: () => unknown): ConfigError {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("memoryOptionsFromUrl", () => {
  it("reads memory:// as a private store and memory://NAME as the store of that name", () => {
    expect(fromUrl("memory://")).toEqual({});
    expect(fromUrl("memory://jobs")).toEqual({ storeName: "jobs" });
    expect(fromUrl("memory://billing/jobs/")).toEqual({ storeName: "billing/jobs" });
  });

  it("refuses a query parameter, user info or a port, naming the url", () => {
    for (const [url, words] of [
      ["memory://jobs?prefx=a", 'takes no parameters, got "?prefx="'],
      ["memory://app:s3cret@jobs", "takes no user name or password"],
      ["memory://jobs:7000", 'takes no port, got "jobs:7000"'],
    ] as const) {
      const error = configErrorFrom(() => fromUrl(url));
      expect(error.field, url).toBe("url");
      expect(error.message, url).toContain(words);
      expect(error.message, url).not.toContain("s3cret");
    }
  });

  it("refuses a store name with control characters, naming storeName", () => {
    const error = configErrorFrom(() => fromUrl("memory://jobs/%01"));
    expect(error.field).toBe("storeName");
    expect(error.message).toContain("control characters");
  });

  it("gives the options that share one store between backends of the URL", async () => {
    const url = `memory://shared-${randomUUID().slice(0, 8)}`;
    const a = coordinatorOn(new MemoryBackend(fromUrl(url)));
    const b = coordinatorOn(new MemoryBackend(fromUrl(url)));
    const c = coordinatorOn(new MemoryBackend(fromUrl(`${url}-other`)));
    const held = await a.acquire("jobs", { waitMs: 0 });
    expect(await b.tryAcquire("jobs")).toBeNull();
    expect(await c.tryAcquire("jobs")).not.toBeNull();
    await held.release();
    expect(await b.tryAcquire("jobs")).not.toBeNull();
  });
});

describe("MemoryBackend options", () => {
  it("two backends with one storeName share their locks; without it they do not", async () => {
    const storeName = `shared-${randomUUID().slice(0, 8)}`;
    const a = new MemoryBackend({ storeName });
    const b = new MemoryBackend({ storeName });
    expect(a.store).toBe(b.store);
    expect(new MemoryBackend().store).not.toBe(new MemoryBackend().store);
  });

  it("builds a private store on the clock given, or uses the store given", () => {
    const clock = new ManualClock();
    expect(new MemoryBackend({ clock }).store.clock).toBe(clock);
    const store = new MemoryStore();
    expect(new MemoryBackend({ store }).store).toBe(store);
  });

  it("refuses what it does not understand with a ConfigError naming the field", () => {
    const cases: Array<[unknown, string, string]> = [
      [{ stor: new MemoryStore() }, "options.stor", "is not a memory backend option"],
      [{ store: {} }, "store", "must be a MemoryStore"],
      [{ clock: { now: () => 0 } }, "clock", "must be a Clock"],
      [{ storeName: "" }, "storeName", "must not be empty"],
      [{ storeName: 7 }, "storeName", "must be a string"],
      [{ storeName: "a", store: new MemoryStore() }, "storeName", "not both"],
      [{ storeName: "a", clock: new ManualClock() }, "clock", "system clock"],
      ["memory://", "options", "pass { store }"],
    ];
    for (const [options, field, words] of cases) {
      const error = configErrorFrom(() => new MemoryBackend(options as MemoryBackendOptions));
      expect(error.field, JSON.stringify(options)).toBe(field);
      expect(error.message, JSON.stringify(options)).toContain(words);
    }
  });

  it("accepts options left undefined", () => {
    expect(() => new MemoryBackend({ store: undefined, clock: undefined })).not.toThrow();
  });
});
