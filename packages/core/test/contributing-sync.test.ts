import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");

it("the code blocks of CONTRIBUTING.md's recipe section, put together, are example-recipe.test.ts word for word", () => {
  const guide = readFileSync(join(ROOT, "CONTRIBUTING.md"), "utf8");
  const start = guide.indexOf("\n## Adding a recipe\n");
  expect(start).toBeGreaterThan(0);
  const end = guide.indexOf("\n## ", start + 1);
  const section = guide.slice(start, end < 0 ? undefined : end);
  const blocks = [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
  expect(blocks.length).toBeGreaterThan(1);
  const test = readFileSync(
    join(ROOT, "packages/core/test/recipes/example-recipe.test.ts"),
    "utf8",
  );
  expect(blocks.join("\n")).toBe(test);
});
