import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");

it("the testing guide's code blocks, put together, are testing-guide.test.ts word for word", () => {
  const guide = readFileSync(join(ROOT, "docs/testing.md"), "utf8");
  const blocks = [...guide.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
  expect(blocks.length).toBeGreaterThan(3);
  const test = readFileSync(join(ROOT, "packages/core/test/testing-guide.test.ts"), "utf8");
  expect(blocks.join("\n")).toBe(test);
});
