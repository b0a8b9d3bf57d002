import { SilentListener, settleTime } from "@baton/conformance/faults";
import { BackendUnavailableError, createCoordinator } from "@baton/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

/** A generous bound for close(): it must not wait on a store that never answers. */
const CLOSE_BOUND_MS = 5_000;

describe("postgres against a store that accepts connections and never answers", () => {
  let silent: SilentListener;
  beforeEach(async () => {
    silent = await SilentListener.start();
  });
  afterEach(async () => {
    await silent.close();
  });

  for (const locks of ["advisory", "lease"] as const) {
    const url = () =>
      `postgres://baton:secret-password@127.0.0.1:${silent.port}/app?locks=${locks}`;

    it(`(${locks}) opening a session fails naming the server, never the password`, async () => {
      const backend = new PostgresBackend({ url: url() });
      try {
        const error = await backend.openSession({ ttlMs: 2_000, ownerId: "silent" }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain(`127.0.0.1:${silent.port}/app`);
        expect((error as Error).message).not.toContain("secret-password");
      } finally {
        await backend.close();
      }
    }, 30_000);

    it(`(${locks}) an acquire that gives up names the server; coordinator.close() settles soon after`, async () => {
      const coordinator = createCoordinator({ url: url(), ttlMs: 2_000 });
      const error = await coordinator.acquire("job", { waitMs: 30_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(`127.0.0.1:${silent.port}/app`);
      expect((error as Error).message).not.toContain("secret-password");
      expect(silent.accepted).toBeGreaterThan(0);
      expect(await settleTime(coordinator.close(), 20_000)).toBeLessThan(CLOSE_BOUND_MS);
      expect(silent.open).toBe(0);
    }, 60_000);

    it(`(${locks}) core's own bound on opening a session names the server, never the password`, async () => {
      // A connect timeout longer than core's 5 s bound: core gives up first, and says where.
      const backend = new PostgresBackend({ url: `${url()}&connect_timeout=30` });
      expect(backend.endpoint).toBe(`127.0.0.1:${silent.port}`);
      const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
      const error = await coordinator.acquire("job", { waitMs: 30_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(
        `the postgres store at 127.0.0.1:${silent.port} did not open a session within 5000 ms`,
      );
      expect((error as Error).message).not.toContain("secret-password");
      await settleTime(coordinator.close(), 20_000);
    }, 60_000);

    it(`(${locks}) coordinator.close() settles while an acquire is still opening a session`, async () => {
      const coordinator = createCoordinator({ url: url(), ttlMs: 2_000 });
      const acquiring = coordinator.acquire("job", { waitMs: 30_000 });
      acquiring.catch(() => undefined);
      await silent.until((s) => s.accepted > 0);
      expect(await settleTime(coordinator.close(), 20_000)).toBeLessThan(CLOSE_BOUND_MS);
      expect(await settleTime(acquiring, 20_000)).toBeLessThan(CLOSE_BOUND_MS);
    }, 60_000);

    it(`(${locks}) backend.close() settles while a session is still opening`, async () => {
      const backend = new PostgresBackend({ url: url() });
      const opening = backend.openSession({ ttlMs: 2_000, ownerId: "silent" });
      opening.catch(() => undefined);
      await silent.until((s) => s.accepted > 0);
      expect(await settleTime(backend.close(), 20_000)).toBeLessThan(CLOSE_BOUND_MS);
      // The open does not outlive the backend's close either, and no connection is left open.
      expect(await settleTime(opening, 20_000)).toBeLessThan(CLOSE_BOUND_MS);
      await expect(opening).rejects.toBeInstanceOf(BackendUnavailableError);
      await silent.until((s) => s.open === 0);
    }, 60_000);
  }
});
