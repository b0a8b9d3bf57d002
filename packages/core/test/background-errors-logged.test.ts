import { describe, expect, it } from "vitest";
import { ConfigError, createCoordinator, ManualClock } from "../src/index.js";
import { failOnUnhandledRejections, flush } from "./fakes/helpers.js";
import { ScriptedBackend } from "./fakes/scripted-backend.js";

failOnUnhandledRejections();

function loggerSpy() {
  const lines: { level: string; message: string; details: unknown }[] = [];
  const at = (level: string) => (message: string, details?: unknown) => {
    lines.push({ level, message, details });
  };
  return { lines, logger: { debug: at("debug"), warn: at("warn"), error: at("error") } };
}

describe("every background error reaches the configured logger", () => {
  it("an elect()-only service whose campaign keeps failing logs each failure with its error", async () => {
    const clock = new ManualClock();
    const backend = new ScriptedBackend({ clock });
    const { lines, logger } = loggerSpy();
    const coordinator = createCoordinator({ backend, clock, ttlMs: 1_000, logger });
    const failure = new ConfigError("url", 'unknown parameter "prefx"; use prefix');
    backend.hooks.acquire = async () => {
      throw failure;
    };
    let elected = false;
    const election = coordinator.elect("scheduler", {
      onElected: () => {
        elected = true;
      },
    });
    await flush();
    await clock.advance(10_000);
    await flush();
    expect(elected).toBe(false);
    const logged = lines.filter((l) => l.details === failure);
    expect(logged.length).toBeGreaterThan(0);
    expect(logged[0]?.message).toContain("campaigning");
    expect(logged[0]?.message).toContain("prefx");
    expect(logged[0]?.level).toBe("warn");
    await election.close();
    await coordinator.close();
  });

  it("nothing is logged for a coordinator without background failures", async () => {
    const clock = new ManualClock();
    const { lines, logger } = loggerSpy();
    const coordinator = createCoordinator({
      backend: new ScriptedBackend({ clock }),
      clock,
      ttlMs: 1_000,
      logger,
    });
    const lock = await coordinator.acquire("jobs", { waitMs: 0 });
    await lock.release();
    await coordinator.close();
    expect(lines).toEqual([]);
  });
});
