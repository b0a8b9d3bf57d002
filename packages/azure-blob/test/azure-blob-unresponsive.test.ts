import { closeWhilePending, SilentListener, timed } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import {
  AuthenticationError,
  BackendUnavailableError,
  createCoordinator,
  parseBackendUrl,
} from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { AzureBlobBackend, azureBlobOptionsFromUrl } from "../src/index.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

describe("azure blob against a store that accepts connections and never answers", () => {
  it("acquire fails in bounded time naming the host, and close() settles at once", async () => {
    const silent = await SilentListener.start();
    cleanups.push(() => silent.close());
    const backend = new AzureBlobBackend({
      endpoint: `http://${silent.host}:${silent.port}/devstoreaccount1`,
      accountName: "devstoreaccount1",
      container: "locks",
      requestTimeoutMs: 500,
    });
    const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
    cleanups.push(() => coordinator.close());
    const first = await timed(coordinator.acquire("job", { waitMs: 1_000 }));
    expect(first.error).toBeInstanceOf(BackendUnavailableError);
    expect(first.ms).toBeLessThan(15_000);
    expect(String((first.error as Error).message)).toContain(`${silent.host}:${silent.port}`);
    expect(silent.accepted).toBeGreaterThan(0);

    const { closed, pending: late } = await closeWhilePending(
      coordinator.acquire("job", { waitMs: 60_000 }),
      () => coordinator.close(),
    );
    expect(closed.ms).toBeLessThan(3_000);
    expect(late.ms).toBeLessThan(3_000);
    expect(late.error).toBeInstanceOf(Error);
    expect((await timed(backend.close())).ms).toBeLessThan(3_000);
  }, 40_000);
});

describeBackend("azure-blob", (url) => {
  it("a wrong account key is an AuthenticationError at once, not retried, without the key", async () => {
    const options = azureBlobOptionsFromUrl(parseBackendUrl(url));
    const wrongKey = Buffer.from("not the account key of this emulator").toString("base64");
    const backend = new AzureBlobBackend({ ...options, accountKey: wrongKey });
    const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
    cleanups.push(() => coordinator.close());
    const result = await timed(coordinator.acquire("job", { waitMs: 10_000 }));
    expect(result.error).toBeInstanceOf(AuthenticationError);
    expect((result.error as AuthenticationError).code).toBe("BATON_AUTH");
    expect((result.error as AuthenticationError).field).toBe("credentials");
    expect(result.ms).toBeLessThan(3_000);
    expect(String((result.error as Error).message)).not.toContain(wrongKey);
  });
});
