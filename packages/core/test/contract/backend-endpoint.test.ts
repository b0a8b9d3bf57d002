import { describe, expect, it } from "vitest";
import { BackendUnavailableError, createCoordinator, ManualClock } from "../../src/index.js";
import { failOnUnhandledRejections } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

failOnUnhandledRejections();

/** A backend that says where it connects, as the PostgreSQL and ZooKeeper adapters do. */
class BackendAt extends ScriptedBackend {
  readonly endpoint = "db1.example:5432";
}

function logged() {
  const messages: string[] = [];
  const at = (message: string) => {
    messages.push(message);
  };
  return { messages, logger: { debug: at, warn: at, error: at } };
}

describe("core's messages about a backend name where it connects", () => {
  it("a session that did not open in time: the store's kind and endpoint", async () => {
    const clock = new ManualClock();
    const backend = new BackendAt({ clock, kind: "postgres" });
    backend.hooks.openSession = () => new Promise(() => undefined);
    const coordinator = createCoordinator({ backend, clock, ttlMs: 2_000 });
    const acquiring = coordinator.acquire("report").then(
      () => undefined,
      (e: unknown) => e,
    );
    await clock.advance(5_000);
    const error = await acquiring;
    expect(error).toBeInstanceOf(BackendUnavailableError);
    expect((error as Error).message).toMatch(
      /the postgres store at db1\.example:5432 did not open a session within 5000 ms/,
    );
  });

  it("renewal failures and the recovery: the store's kind and endpoint", async () => {
    const clock = new ManualClock();
    const backend = new BackendAt({ clock, kind: "postgres" });
    const { messages, logger } = logged();
    const coordinator = createCoordinator({ backend, clock, ttlMs: 3_000, logger });
    const lock = await coordinator.acquire("report");
    backend.hooks.keepAlive = async () => {
      throw new Error("Connection terminated unexpectedly");
    };
    await clock.advance(2_000);
    backend.hooks.keepAlive = undefined;
    await clock.advance(1_000);
    expect(lock.held).toBe(true);
    expect(messages[0]).toMatch(
      /^baton: renewal failed \(the postgres store at db1\.example:5432\), \d+ ms left/,
    );
    expect(messages.at(-1)).toMatch(
      /^baton: renewal succeeded again \(the postgres store at db1\.example:5432\) after/,
    );
    await coordinator.close();
  });
});
