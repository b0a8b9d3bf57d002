import { describe, expect, it } from "vitest";
import {
  type BackendUrl,
  ConfigError,
  createCoordinator,
  MemoryBackend,
  parseBackendUrl,
  registerBackend,
} from "../src/index.js";
import { configErrorOf } from "./fakes/helpers.js";

describe("URL options are checked in createCoordinator, before any I/O", () => {
  it("memory://?prefx= fails at construction", () => {
    const error = configErrorOf({ url: "memory://?prefx=jobs" });
    expect(error.field).toBe("url");
    expect(error.message).toContain("prefx");
  });

  it("a registered adapter's URL check runs at construction; its factory is not called", () => {
    let built = 0;
    const checked: BackendUrl[] = [];
    registerBackend(
      "check-test",
      () => {
        built++;
        return new MemoryBackend();
      },
      {
        checkUrl: (url) => {
          checked.push(url);
          const unknown = [...url.searchParams.keys()].find((k) => k !== "prefix");
          if (unknown !== undefined)
            throw new ConfigError("prefix", `unknown parameter "${unknown}"`);
        },
      },
    );
    const error = configErrorOf({ url: "check-test://db:1?prefx=a" });
    expect(error.field).toBe("prefix");
    expect(error.message).toContain('unknown parameter "prefx"');
    expect(built).toBe(0);
    expect(() => parseBackendUrl("check-test://db:1?prefx=a")).toThrow(ConfigError);

    const coordinator = createCoordinator({ url: "check-test://db:1?prefix=a" });
    expect(checked.at(-1)?.searchParams.get("prefix")).toBe("a");
    expect(built).toBe(0);
    void coordinator.close();
  });

  it("a check that is not a function is refused", () => {
    expect(() =>
      registerBackend("check-test-2", () => new MemoryBackend(), {
        checkUrl: 42 as unknown as () => void,
      }),
    ).toThrow(ConfigError);
  });
});
