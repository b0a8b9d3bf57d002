import {
  SILENT_CLOSE_BOUND_MS,
  settleTime,
  silentListenerPerTest,
  silentStoreTests,
} from "@baton/conformance/faults";
import { BackendUnavailableError, createCoordinator } from "@baton/core";
import { describe, expect, it } from "vitest";
import { PostgresBackend } from "../src/index.js";

describe("postgres against a store that accepts connections and never answers", () => {
  const listener = silentListenerPerTest();

  for (const locks of ["advisory", "lease"] as const) {
    const urlOf = (port: number) =>
      `postgres://baton:secret-password@127.0.0.1:${port}/app?locks=${locks}`;
    const url = () => urlOf(listener().port);

    silentStoreTests({
      listener,
      label: `(${locks}) `,
      url: (silent) => urlOf(silent.port),
      backend: (silent) => new PostgresBackend({ url: urlOf(silent.port) }),
      names: (silent) => [`127.0.0.1:${silent.port}/app`],
      secret: "secret-password",
    });

    it(`(${locks}) opening a session fails naming the server, never the password`, async () => {
      const backend = new PostgresBackend({ url: url() });
      try {
        const error = await backend.openSession({ ttlMs: 2_000, ownerId: "silent" }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect((error as Error).message).toContain(`127.0.0.1:${listener().port}/app`);
        expect((error as Error).message).not.toContain("secret-password");
      } finally {
        await backend.close();
      }
    }, 30_000);

    it(`(${locks}) core's own bound on opening a session names the server, never the password`, async () => {
      // A connect timeout longer than core's 5 s bound: core gives up first, and says where.
      const backend = new PostgresBackend({ url: `${url()}&connect_timeout=30` });
      expect(backend.endpoint).toBe(`127.0.0.1:${listener().port}`);
      const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
      const error = await coordinator.acquire("job", { waitMs: 30_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      expect((error as Error).message).toContain(
        `the postgres store at 127.0.0.1:${listener().port} did not open a session within 5000 ms`,
      );
      expect((error as Error).message).not.toContain("secret-password");
      await settleTime(coordinator.close(), 20_000);
    }, 60_000);

    it(`(${locks}) coordinator.close() settles while an acquire is still opening a session`, async () => {
      const coordinator = createCoordinator({ url: url(), ttlMs: 2_000 });
      const acquiring = coordinator.acquire("job", { waitMs: 30_000 });
      acquiring.catch(() => undefined);
      await listener().until((s) => s.accepted > 0);
      expect(await settleTime(coordinator.close(), 20_000)).toBeLessThan(SILENT_CLOSE_BOUND_MS);
      expect(await settleTime(acquiring, 20_000)).toBeLessThan(SILENT_CLOSE_BOUND_MS);
    }, 60_000);
  }
});
