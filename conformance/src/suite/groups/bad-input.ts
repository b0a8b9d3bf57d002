import { ConfigError, createCoordinator, MemoryFence } from "@baton/core";
import { describe, expect, it } from "vitest";
import { countingBackend } from "../counting-backend.js";
import type { SuiteContext } from "../suite-context.js";

/** Bad input is a ConfigError naming the field, raised before any I/O. */
export function badInputGroup(ctx: SuiteContext): void {
  describe("bad input", () => {
    const counting = () => countingBackend(ctx.backend);

    const expectConfig = async (promise: Promise<unknown>, field: string) => {
      const error = await promise.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe(field);
      expect((error as ConfigError).message).toContain(field);
    };

    it("lock names: empty, too long, control characters, not a string", async () => {
      const { backend, opened } = counting();
      const c = createCoordinator({ backend, ttlMs: ctx.target.ttlMs });
      try {
        await expectConfig(c.acquire(""), "name");
        await expectConfig(c.acquire("x".repeat(257)), "name");
        await expectConfig(c.acquire("bad\nname"), "name");
        await expectConfig(c.tryAcquire("nul\u0000"), "name");
        await expectConfig(
          c.withLock(42 as unknown as string, () => 1),
          "name",
        );
        await expectConfig(c.holder(""), "name");
        expect(opened()).toBe(0);
      } finally {
        await c.close();
      }
    });

    it("lock names with an unpaired UTF-16 surrogate, at every call that takes a name", async () => {
      // UTF-8 cannot spell a lone surrogate: stored as U+FFFD, these names would meet as one
      // lock on some backends and stay apart on others.
      const { backend, opened } = counting();
      const c = createCoordinator({ backend, ttlMs: ctx.target.ttlMs });
      const syncError = (fn: () => unknown) => {
        try {
          fn();
        } catch (error) {
          return Promise.reject(error);
        }
        return Promise.resolve();
      };
      try {
        for (const name of ["x\ud800", "x\udbff", "\udc00x", "a\udc00\ud800b", "x\ud83d"]) {
          await expectConfig(c.acquire(name), "name");
          await expectConfig(c.tryAcquire(name), "name");
          await expectConfig(
            c.withLock(name, () => 1),
            "name",
          );
          await expectConfig(c.holder(name), "name");
          await expectConfig(c.watch(name)[Symbol.asyncIterator]().next(), "name");
          await expectConfig(
            syncError(() => c.elect(name, { onElected: () => undefined })),
            "name",
          );
          await expectConfig(
            syncError(() => c.partitions(name, { count: 2, onAssigned: () => undefined })),
            "name",
          );
        }
        await expectConfig(c.acquire("ok", { value: "v\udfff" }), "value");
        expect(opened()).toBe(0);
      } finally {
        await c.close();
      }
      await expectConfig(
        syncError(() => createCoordinator({ backend, ownerId: "owner\ud800" })),
        "ownerId",
      );
    });

    it("well-formed names that differ in one character are different locks", async () => {
      // The characters a lossy encoding would fold together: astral characters (surrogate
      // pairs), U+FFFD itself, and the composed and decomposed forms of one letter.
      const base = ctx.name("unicode");
      const names = [
        `${base}-\u{1F600}`,
        `${base}-\u{1F601}`,
        `${base}-\u{10FFFF}`,
        `${base}-\uFFFD`,
        `${base}-\u00e9`,
        `${base}-e\u0301`,
      ];
      const c = ctx.coordinator();
      const locks = await Promise.all(
        names.map((name, i) => c.tryAcquire(name, { value: `v${i}` })),
      );
      expect(locks.map((lock) => lock?.name)).toEqual(names);
      for (const [i, name] of names.entries()) {
        expect(await c.holder(name)).toMatchObject({ value: `v${i}` });
      }
      await Promise.all(locks.map((lock) => lock?.release()));
    });

    it("timeouts, values, signals and unknown options", async () => {
      const { backend, opened } = counting();
      const c = createCoordinator({ backend, ttlMs: ctx.target.ttlMs });
      try {
        await expectConfig(c.acquire("ok", { waitMs: -1 }), "waitMs");
        await expectConfig(c.acquire("ok", { waitMs: 1.5 }), "waitMs");
        await expectConfig(c.acquire("ok", { waitMs: Number.POSITIVE_INFINITY }), "waitMs");
        await expectConfig(c.acquire("ok", { value: 7 as unknown as string }), "value");
        await expectConfig(c.acquire("ok", { value: "v".repeat(4097) }), "value");
        await expectConfig(c.acquire("ok", { signal: {} as AbortSignal }), "signal");
        await expectConfig(c.acquire("ok", { wait: 5 } as never), "options.wait");
        expect(opened()).toBe(0);
      } finally {
        await c.close();
      }
    });

    it("coordinator options are checked synchronously at construction", () => {
      const { backend } = counting();
      const fail = (options: unknown, field: string) => {
        let caught: unknown;
        try {
          createCoordinator(options as never);
        } catch (error) {
          caught = error;
        }
        expect(caught).toBeInstanceOf(ConfigError);
        expect((caught as ConfigError).field).toBe(field);
      };
      fail({ backend, ttlMs: 0 }, "ttlMs");
      fail({ backend, ttlMs: Number.NaN }, "ttlMs");
      fail({ backend, ttlMs: 90_000_000 }, "ttlMs");
      fail({ backend, mode: "fast" }, "mode");
      fail({ backend, ttlsMs: 100 }, "options.ttlsMs");
      fail({ backend, url: "memory://" }, "backend");
      fail({}, "backend");
      fail({ url: "nope" }, "url");
      fail({ url: "ftp://x" }, "url");
    });

    it("a fence outside correctness mode is refused, not silently ignored", () => {
      const { backend } = counting();
      for (const mode of [undefined, "efficiency"]) {
        let caught: unknown;
        try {
          createCoordinator({
            backend,
            fence: new MemoryFence(),
            ...(mode ? { mode } : {}),
          } as never);
        } catch (error) {
          caught = error;
        }
        expect(caught).toBeInstanceOf(ConfigError);
        expect((caught as ConfigError).field).toBe("fence");
        expect((caught as ConfigError).message).toContain('mode "correctness"');
      }
    });
  });
}
