/**
 * `@baton/core`'s public API, as published: the package packed with `npm pack`, installed into a
 * fresh project outside the repository, and the names it exports (the values a program imports
 * and the types its compiler sees) compared with the committed list in
 * `packaging/fixtures/core-exports.txt`. A name added, removed or changed in kind fails here, so
 * every change to the API is a deliberate edit of that list.
 *
 * To accept a deliberate change, run this file with `BATON_WRITE_EXPORTS=1` and commit the list.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packWorkspace } from "../src/pack-workspace.js";
import {
  declaredExports,
  diffExports,
  type ExportedName,
  formatExports,
  isRuntimeKind,
  parseExports,
} from "../src/public-exports.js";

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const LIST = join(ROOT, "packaging/fixtures/core-exports.txt");
const MINUTES = 60_000;

const HEADER = [
  "# The names @baton/core exports, one a line: the name, then what it is (class, function,",
  "# const, interface, type; `type-only` for a value exported with `export type`).",
  "# packaging/test/core-exports.test.ts compares the published package with this list.",
  "# Change it only with a deliberate change to the public API (BATON_WRITE_EXPORTS=1).",
].join("\n");

/** A consumer's environment: no workspace export conditions, no npm script variables. */
function consumerEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|INIT_CWD$|NODE_OPTIONS$|NODE_PATH$|VITEST|TSX_)/i.test(key)) continue;
    env[key] = value;
  }
  env.npm_config_update_notifier = "false";
  env.npm_config_fund = "false";
  env.npm_config_audit = "false";
  return env;
}

/** Shown when the lists differ: what is gone and what is new, one name a line. */
function explain(removed: readonly string[], added: readonly string[]): string {
  return [
    "@baton/core's exports differ from packaging/fixtures/core-exports.txt:",
    ...removed.map((line) => `  - ${line}`),
    ...added.map((line) => `  + ${line}`),
    "If the change is deliberate, run this test with BATON_WRITE_EXPORTS=1 and commit the list.",
  ].join("\n");
}

describe.sequential("@baton/core's public exports, from its published tarball", {
  timeout: 5 * MINUTES,
}, () => {
  let work = "";
  let installed = "";
  let runtime: string[] = [];
  let declared: ExportedName[] = [];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "baton-core-exports-"));
    const [core] = packWorkspace(ROOT, join(work, "tarballs"), ["packages/core"]);
    if (core === undefined) throw new Error("npm pack made no tarball for packages/core");
    const app = join(work, "app");
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "core-exports-app", private: true, type: "module" }),
    );
    const env = consumerEnv();
    await run("npm", ["install", "--no-audit", "--no-fund", core.tarball], { cwd: app, env });
    installed = join(app, "node_modules/@baton/core");
    const { stdout } = await run(
      "node",
      [
        "--input-type=module",
        "-e",
        "const core = await import('@baton/core'); console.log(JSON.stringify(Object.keys(core)));",
      ],
      { cwd: app, env },
    );
    runtime = (JSON.parse(stdout) as string[]).sort();
    declared = declaredExports(join(installed, "dist/index.d.ts"));
  }, 10 * MINUTES);

  afterAll(() => {
    if (work !== "") rmSync(work, { recursive: true, force: true });
  });

  it("imports at run time exactly the values its declarations export", () => {
    const values = declared.filter((n) => isRuntimeKind(n.kind)).map((n) => n.name);
    expect(runtime.length).toBeGreaterThan(20);
    expect({
      onlyAtRunTime: runtime.filter((name) => !values.includes(name)),
      onlyInDeclarations: values.filter((name) => !runtime.includes(name)),
    }).toEqual({ onlyAtRunTime: [], onlyInDeclarations: [] });
  });

  it("exports the names of the committed list, each the same kind", () => {
    if (process.env.BATON_WRITE_EXPORTS === "1") {
      writeFileSync(LIST, `${HEADER}\n${formatExports(declared)}`);
    }
    const expected = parseExports(readFileSync(LIST, "utf8"));
    const { removed, added } = diffExports(expected, declared);
    if (removed.length + added.length > 0) console.error(explain(removed, added));
    expect({ removed, added }, explain(removed, added)).toEqual({ removed: [], added: [] });
    expect(declared.length).toBe(expected.length);
  });
});
