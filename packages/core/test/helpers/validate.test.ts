import { describe, expect, it } from "vitest";
import { ConfigError, type Coordinator } from "../../src/index.js";
import { rejectionOf, setup } from "../support/helpers.js";

const BAD_NAMES: ReadonlyArray<{ label: string; name: unknown; message: RegExp }> = [
  { label: "a number", name: 42, message: /must be a string, got number/ },
  { label: "undefined", name: undefined, message: /must be a string, got undefined/ },
  { label: "null", name: null, message: /must be a string, got null/ },
  { label: "an empty string", name: "", message: /must not be empty/ },
  {
    label: "257 characters",
    name: "x".repeat(257),
    message: /at most 256 characters, got 257/,
  },
  { label: "a newline", name: "jobs\ninvoices", message: /control characters/ },
  { label: "a NUL", name: "jobs\u0000", message: /control characters/ },
  { label: "a DEL", name: "jobs\u007f", message: /control characters/ },
  { label: "a C1 control", name: "jobs\u0085", message: /control characters/ },
  {
    label: "an unpaired high surrogate",
    name: "jobs\ud800",
    message: /unpaired UTF-16 surrogate at index 4/,
  },
  {
    label: "an unpaired low surrogate",
    name: "\udbffjobs\udc00",
    message: /unpaired UTF-16 surrogate at index 0/,
  },
];

const CALLS: ReadonlyArray<{
  label: string;
  call: (c: Coordinator, name: unknown) => Promise<unknown>;
}> = [
  { label: "acquire", call: (c, name) => c.acquire(name as string) },
  { label: "tryAcquire", call: (c, name) => c.tryAcquire(name as string) },
  { label: "withLock", call: (c, name) => c.withLock(name as string, () => "ran") },
  { label: "holder", call: (c, name) => c.holder(name as string) },
];

describe("lock names are checked before any I/O", () => {
  for (const { label: callLabel, call } of CALLS) {
    for (const { label, name, message } of BAD_NAMES) {
      it(`${callLabel} rejects ${label} with ConfigError(name)`, async () => {
        const { backend, coordinator } = setup();
        const error = await rejectionOf(call(coordinator, name));
        expect(error).toBeInstanceOf(ConfigError);
        expect(error).toMatchObject({ field: "name", code: "BATON_CONFIG" });
        expect((error as Error).message).toMatch(message);
        expect(backend.calls.openSession).toBe(0);
        expect(backend.calls.acquire).toBe(0);
      });
    }
  }

  it("accepts a 256-character name and unicode", async () => {
    const { coordinator } = setup();
    const long = await coordinator.acquire("n".repeat(256), { waitMs: 0 });
    const unicode = await coordinator.acquire("jobs/facturación/日本/\u{1F600}", { waitMs: 0 });
    expect(long.name).toHaveLength(256);
    expect(unicode.held).toBe(true);
  });

  it("withLock never runs fn for a bad name", async () => {
    const { coordinator } = setup();
    let ran = false;
    await expect(
      coordinator.withLock("", () => {
        ran = true;
      }),
    ).rejects.toBeInstanceOf(ConfigError);
    expect(ran).toBe(false);
  });

  it("withLock rejects a non-function fn with ConfigError(fn) before any I/O", async () => {
    const { backend, coordinator } = setup();
    const error = await rejectionOf(
      coordinator.withLock("jobs", "not a function" as unknown as () => void),
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ field: "fn" });
    expect(backend.calls.openSession).toBe(0);
  });
});
