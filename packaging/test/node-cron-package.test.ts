import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shResult } from "../src/consumer-shell.js";
import { type PackedPackage, packWorkspace } from "../src/pack-workspace.js";
import { readmeExamples } from "../src/readme-examples.js";
import { type ScopedRegistry, startScopedRegistry } from "../src/scoped-registry.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const FIXTURES = join(ROOT, "packaging/fixtures");
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const MINUTES = 60_000;
const PACKAGES = ["packages/core", "packages/redis", "packages/node-cron"];
/** The node-cron releases the package is tested with. */
const NODE_CRON = "node-cron@4.6.0";

async function installProject(dir: string, registry: ScopedRegistry, specs: string[]) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "node-cron-consumer", private: true, type: "module" }),
  );
  const out = await shResult(dir, "npm", [
    "install",
    "--no-audit",
    "--no-fund",
    ...registry.npmArgs,
    ...specs,
  ]);
  if (out.code !== 0) throw new Error(`npm install failed in ${dir}:\n${out.output}`);
}

/** Type-checks `dir`'s `*.ts` as a strict consumer would: no skipLibCheck. */
async function typeCheck(dir: string, resolution: "NodeNext" | "Bundler") {
  const compilerOptions = {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    skipLibCheck: false,
    noEmit: true,
    target: "ES2022",
    types: ["node"],
    ...(resolution === "NodeNext"
      ? { module: "NodeNext", moduleResolution: "NodeNext" }
      : { module: "ESNext", moduleResolution: "Bundler" }),
  };
  const config = `tsconfig.${resolution.toLowerCase()}.json`;
  writeFileSync(join(dir, config), JSON.stringify({ compilerOptions, include: ["*.ts"] }));
  return { resolution, ...(await shResult(dir, "node", [TSC, "-p", config])) };
}

describe.sequential("@baton/node-cron, installed from a registry into fresh projects", {
  timeout: 5 * MINUTES,
}, () => {
  let work = "";
  let packed: PackedPackage[] = [];
  let registry: ScopedRegistry;
  let app = "";
  let bare = "";

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "baton-node-cron-"));
    packed = packWorkspace(ROOT, join(work, "tarballs"), PACKAGES);
    registry = await startScopedRegistry(packed);
    const specs = packed.map((p) => `${p.name}@${p.version}`);
    app = join(work, "app");
    bare = join(work, "without-node-cron");
    await Promise.all([
      installProject(app, registry, [...specs, NODE_CRON, "@types/node@20"]),
      installProject(bare, registry, [
        ...specs.filter((s) => !s.startsWith("@baton/redis@")),
        "@types/node@20",
      ]),
    ]);
  }, 10 * MINUTES);

  afterAll(async () => {
    await registry?.close();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  });

  it("packs dist, declarations and README, and declares no dependency on node-cron", async () => {
    const pkg = packed.find((p) => p.name === "@baton/node-cron") as PackedPackage;
    const listing = (await shResult(work, "tar", ["-tzf", pkg.tarball])).output.trim().split("\n");
    for (const file of ["LICENSE", "README.md", "dist/index.js", "dist/index.d.ts"]) {
      expect(listing).toContain(`package/${file}`);
    }
    expect(listing.filter((f) => /\/(test|fixtures)\/|\.test\.|tsbuildinfo/.test(f))).toEqual([]);
    const manifest = pkg.manifest as Record<string, Record<string, string> | undefined>;
    expect(Object.keys(manifest.dependencies ?? {})).toEqual([]);
    expect(Object.keys(manifest.peerDependencies ?? {})).toEqual(["@baton/core"]);
    const dist = join(app, "node_modules/@baton/node-cron/dist");
    const declarations = readdirSync(dist).filter((f) => f.endsWith(".d.ts"));
    const imports = declarations.flatMap((f) =>
      [...readFileSync(join(dist, f), "utf8").matchAll(/from "([^"]+)"/g)].map((m) => m[1]),
    );
    expect(new Set(imports)).toEqual(
      new Set(["@baton/core", "./node-cron-shapes.js", "./run-coordinator.js"]),
    );
  });

  it("type-checks the README examples with node-cron 4, strict, NodeNext and Bundler", async () => {
    const examples = readmeExamples(ROOT, ["packages/node-cron/README.md"]);
    expect(examples.length).toBeGreaterThanOrEqual(2);
    const dir = join(app, "ts-readme");
    mkdirSync(dir, { recursive: true });
    for (const example of examples) {
      writeFileSync(join(dir, example.fileName), `// ${example.origin}\n${example.code}`);
    }
    for (const check of await Promise.all([
      typeCheck(dir, "NodeNext"),
      typeCheck(dir, "Bundler"),
    ])) {
      expect(check.output, check.resolution).not.toMatch(/error TS/);
      expect(check.code, check.resolution).toBe(0);
    }
  });

  it("type-checks an app without node-cron installed: the declarations never import it", async () => {
    cpSync(join(FIXTURES, "node-cron-free-app.ts"), join(bare, "node-cron-free-app.ts"));
    expect(() => readdirSync(join(bare, "node_modules/node-cron"))).toThrow();
    for (const check of await Promise.all([
      typeCheck(bare, "NodeNext"),
      typeCheck(bare, "Bundler"),
    ])) {
      expect(check.output, check.resolution).not.toMatch(/error TS/);
      expect(check.code, check.resolution).toBe(0);
    }
  });

  it("runs two replicas of a per-second node-cron task on one store: each fire once", async () => {
    cpSync(join(FIXTURES, "node-cron-app.mjs"), join(app, "node-cron-app.mjs"));
    const { code, output } = await shResult(app, "node", ["node-cron-app.mjs"]);
    console.log(output.trim());
    expect(output).toMatch(/^node-cron fires [2-9], each once$/m);
    expect(code).toBe(0);
  });
});
