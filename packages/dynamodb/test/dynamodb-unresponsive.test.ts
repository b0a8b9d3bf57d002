import { closeWhilePending, SilentListener, timed } from "@baton/conformance/faults";
import { AuthenticationError, BackendUnavailableError, createCoordinator } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { DynamoDBBackend, type DynamoDBClientLike } from "../src/index.js";

const SECRET = "wJalrXUtnFEMI-never-printed";
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

/** A backend whose endpoint is `silent`, with a secret that must never be printed. */
function silentBackend(silent: SilentListener, requestTimeoutMs: number): DynamoDBBackend {
  return new DynamoDBBackend({
    table: "locks",
    endpoint: `http://${silent.host}:${silent.port}`,
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDSILENT", secretAccessKey: SECRET },
    requestTimeoutMs,
  });
}

describe("dynamodb against a store that accepts connections and never answers", () => {
  it("acquire fails in bounded time naming the host, and close() settles at once", async () => {
    const silent = await SilentListener.start();
    cleanups.push(() => silent.close());
    const backend = silentBackend(silent, 500);
    const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
    cleanups.push(() => coordinator.close());
    const first = await timed(coordinator.acquire("job", { waitMs: 1_000 }));
    expect(first.error).toBeInstanceOf(BackendUnavailableError);
    expect(first.ms).toBeLessThan(15_000);
    const message = String((first.error as Error).message);
    expect(message).toContain(`${silent.host}:${silent.port}`);
    expect(message).not.toContain(SECRET);
    expect(silent.accepted).toBeGreaterThan(0);

    // A second acquire is in flight (its request unanswered) when the app shuts down.
    const { closed, pending: late } = await closeWhilePending(
      coordinator.acquire("job", { waitMs: 60_000 }),
      () => coordinator.close(),
    );
    expect(closed.error).toBeUndefined();
    expect(closed.ms).toBeLessThan(3_000);
    expect(late.ms).toBeLessThan(3_000);
    expect(late.error).toBeInstanceOf(Error);
    const backendClosed = await timed(backend.close());
    expect(backendClosed.ms).toBeLessThan(3_000);
  }, 40_000);

  it("backend.close() settles at once while a session is being opened", async () => {
    const silent = await SilentListener.start();
    cleanups.push(() => silent.close());
    const backend = silentBackend(silent, 30_000);
    const { closed, pending: opened } = await closeWhilePending(
      backend.openSession({ ttlMs: 2_000, ownerId: "a" }),
      () => backend.close(),
    );
    expect(closed.ms).toBeLessThan(3_000);
    expect(opened.ms).toBeLessThan(3_000);
    expect(opened.error).toBeInstanceOf(BackendUnavailableError);
  }, 40_000);
});

describe("dynamodb credentials DynamoDB refuses", () => {
  it("are an AuthenticationError at once, never retried, naming the endpoint and not the secret", async () => {
    const sent: string[] = [];
    // DynamoDB's answer to an unknown access key id (dynalite does not check credentials).
    const client: DynamoDBClientLike = {
      send: async (command) => {
        sent.push(command.constructor.name);
        throw Object.assign(new Error("The security token included in the request is invalid."), {
          name: "UnrecognizedClientException",
          $metadata: { httpStatusCode: 400 },
        });
      },
    };
    const backend = new DynamoDBBackend({ table: "locks", client });
    const coordinator = createCoordinator({ backend, ttlMs: 2_000 });
    cleanups.push(() => coordinator.close());
    const result = await timed(coordinator.acquire("job", { waitMs: 10_000 }));
    expect(result.error).toBeInstanceOf(AuthenticationError);
    expect((result.error as AuthenticationError).code).toBe("BATON_AUTH");
    expect((result.error as AuthenticationError).field).toBe("credentials");
    expect(result.ms).toBeLessThan(2_000);
    expect(sent).toEqual(["PutItemCommand"]);
  });
});
