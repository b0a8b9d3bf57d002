import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Core's layers, lowest first. A file may import files of its own layer and of lower ones,
 * never of a higher one. Top-level files (`coordinator.ts`, `index.ts`, ...) are the highest
 * layer. CONTRIBUTING.md ("Core's map") says what each folder owns.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["contract"],
  ["helpers"],
  ["observability"],
  ["memory", "adapter-support"],
  ["kernel"],
  ["recipes"],
  ["(top)"],
];

/** The one module of the kernel a recipe may import: the kernel's door. */
const KERNEL_DOOR = "kernel/index.ts";
/** The module a recipe adds its events to (`declare module`), the event map of the door. */
const KERNEL_EVENTS = "kernel/events.ts";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "../../src");

interface Dependency {
  readonly from: string;
  readonly to: string;
  /** `import` (or re-export), or `augments` for a `declare module` block. */
  readonly kind: "import" | "augments";
}

const IMPORT =
  /(?:import|export)\s[^'"]*?from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)|declare\s+module\s+['"](\.[^'"]+)['"]/g;

/** The relative dependencies of every file of `files` (paths relative to the source root). */
function dependencies(files: ReadonlyMap<string, string>): Dependency[] {
  const found: Dependency[] = [];
  for (const [from, text] of files) {
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3] ?? "";
      const base = posix.join(posix.dirname(from), spec).replace(/\.(js|ts)$/, "");
      const to = [`${base}.ts`, `${base}/index.ts`].find((candidate) => files.has(candidate));
      if (to === undefined) continue;
      found.push({ from, to, kind: m[3] === undefined ? "import" : "augments" });
    }
  }
  return found;
}

function folderOf(path: string): string {
  return path.includes("/") ? (path.split("/")[0] ?? "") : "(top)";
}

function rankOf(path: string): number {
  const folder = folderOf(path);
  return LAYERS.findIndex((layer) => layer.includes(folder));
}

/** Every import circle (a strongly connected component of more than one file). */
function circles(files: ReadonlyMap<string, string>, deps: readonly Dependency[]): string[][] {
  const edges = new Map<string, string[]>([...files.keys()].map((f) => [f, []]));
  for (const d of deps) if (d.kind === "import") edges.get(d.from)?.push(d.to);
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const f of files.keys()) if (!index.has(f)) visit(f);
  return found;
}

/** Every breach of core's layering among `files` (path relative to the source root: text). */
function layerProblems(files: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  for (const path of files.keys()) {
    if (rankOf(path) < 0) problems.push(`${path}: in no layer (add its folder to LAYERS)`);
  }
  const deps = dependencies(files);
  for (const { from, to, kind } of deps) {
    const [fromRank, toRank] = [rankOf(from), rankOf(to)];
    if (fromRank >= 0 && toRank > fromRank) {
      problems.push(`${from} imports ${to}: ${folderOf(from)} is below ${folderOf(to)}`);
    }
    const intoKernel = folderOf(from) === "recipes" && folderOf(to) === "kernel";
    const door = kind === "import" ? to === KERNEL_DOOR : to === KERNEL_EVENTS;
    if (intoKernel && !door) {
      problems.push(
        kind === "import"
          ? `${from} imports ${to}: a recipe reaches the kernel only through ${KERNEL_DOOR}`
          : `${from} augments ${to}: a recipe adds its events to ${KERNEL_EVENTS} only`,
      );
    }
  }
  for (const circle of circles(files, deps)) {
    problems.push(`import circle of ${circle.length}: ${circle.join(", ")}`);
  }
  return problems;
}

function sourceFiles(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".ts")) {
        files.set(relative(root, path).split("\\").join("/"), readFileSync(path, "utf8"));
      }
    }
  };
  walk(root);
  return files;
}

describe("core's layers", () => {
  it("every file of core's source is in a layer, imports only downwards, and there is no import circle", () => {
    const files = sourceFiles(SRC);
    expect(files.size).toBeGreaterThan(40);
    expect(layerProblems(files)).toEqual([]);
  });

  it("the check reports an import of a higher layer, a recipe reaching past the kernel's door, and a circle", () => {
    const files = new Map([
      ["contract/errors.ts", `import { Lock } from "../kernel/lock.js";`],
      ["kernel/lock.ts", `import { BatonError } from "../contract/errors.js";`],
      ["kernel/index.ts", `export { Lock } from "./lock.js";`],
      ["kernel/events.ts", ""],
      [
        "recipes/good.ts",
        `import { Lock } from "../kernel/index.js";\ndeclare module "../kernel/events.js" {}`,
      ],
      [
        "recipes/bad.ts",
        `import type { Lock } from "../kernel/lock.js";\ndeclare module "../kernel/lock.js" {}`,
      ],
      ["extras/new.ts", ""],
    ]);
    expect(layerProblems(files)).toEqual([
      "extras/new.ts: in no layer (add its folder to LAYERS)",
      "contract/errors.ts imports kernel/lock.ts: contract is below kernel",
      "recipes/bad.ts imports kernel/lock.ts: a recipe reaches the kernel only through kernel/index.ts",
      "recipes/bad.ts augments kernel/lock.ts: a recipe adds its events to kernel/events.ts only",
      "import circle of 2: contract/errors.ts, kernel/lock.ts",
    ]);
  });
});
