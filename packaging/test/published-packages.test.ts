/**
 * What we would publish, tested as published: every package packed with `npm pack`, served by a
 * registry on loopback, installed by name into a fresh project outside the repository (other
 * dependencies from the npm registry, no workspace links), then used there the ways consumers
 * use it: ESM, CommonJS, strict TypeScript (NodeNext and Bundler, no skipLibCheck) over the
 * README examples, the `baton` CLI (local and `npm install -g`), and an esbuild bundle.
 */
import { execFile } from "node:child_process";
import {
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describeBackend } from "@baton/conformance/harness";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PackedPackage, packWorkspace } from "../src/pack-workspace.js";
import { readmeExamples } from "../src/readme-examples.js";
import { type ScopedRegistry, startScopedRegistry } from "../src/scoped-registry.js";

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const FIXTURES = join(ROOT, "packaging/fixtures");
const NODE_BIN = dirname(process.execPath);
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const ESBUILD = join(ROOT, "node_modules/esbuild/bin/esbuild");
const MINUTES = 60_000;

/** Runs a command; resolves with stdout + stderr, rejects with them in the message. */
async function sh(cwd: string, file: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  try {
    const { stdout, stderr } = await run(file, args, {
      cwd,
      env: { ...cleanEnv(), ...env },
      maxBuffer: 64 << 20,
      timeout: 4 * MINUTES,
    });
    const output = `${stdout}${stderr}`;
    console.log(
      `$ ${[file, ...args].join(" ").replace(ROOT, ".")}\n${output.trim().slice(-2_000)}`,
    );
    return output;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${file} ${args.join(" ")} failed in ${cwd}:\n${e.stdout ?? ""}${e.stderr ?? e.message}`,
    );
  }
}

/**
 * The environment of a consumer's shell: the machine's settings (certificates, proxies, npm's
 * user config) without what the workspace adds (npm's script variables, export conditions,
 * the workspace's node_modules/.bin on PATH).
 */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|INIT_CWD$|NODE_OPTIONS$|NODE_PATH$|VITEST|TSX_)/i.test(key)) continue;
    env[key] = value;
  }
  env.PATH = `${NODE_BIN}:/usr/local/bin:/usr/bin:/bin`;
  env.npm_config_update_notifier = "false";
  env.npm_config_fund = "false";
  env.npm_config_audit = "false";
  return env;
}

// Tried against the harness's Redis and PostgreSQL: describeBackend skips the block when they
// are not selected, and fails it under CI=true when their servers are missing.
describeBackend("redis", (redisUrl) =>
  describeBackend("postgres", (postgresUrl) =>
    describe.sequential("published packages, installed from a registry into a fresh project", {
      timeout: 5 * MINUTES,
    }, () => {
      const urls = { REDIS_URL: redisUrl, POSTGRES_URL: postgresUrl };
      let work = "";
      let app = "";
      let packed: PackedPackage[] = [];
      let registry: ScopedRegistry;

      beforeAll(async () => {
        work = mkdtempSync(join(tmpdir(), "baton-consumer-"));
        packed = packWorkspace(ROOT, join(work, "tarballs"));
        registry = await startScopedRegistry(packed);
        app = join(work, "app");
        mkdirSync(app);
        writeFileSync(
          join(app, "package.json"),
          `${JSON.stringify({ name: "consumer-app", private: true, type: "module" }, null, 2)}\n`,
        );
        const wanted = packed.map((p) => `${p.name}@${p.version}`);
        // vitest and vite pinned as a Node 20 app would: the conformance package's peer.
        const others = ["ioredis@6", "etcd3@1", "@types/node@20", "vitest@4.1.12", "vite@8.3.8"];
        await sh(app, "npm", [
          "install",
          "--no-audit",
          "--no-fund",
          ...registry.npmArgs,
          ...wanted,
          ...others,
        ]);
        for (const file of [
          "esm-app.mjs",
          "cjs-app.cjs",
          "typed-app.ts",
          "bundle-app.mjs",
          "ioredis5-app.mjs",
        ]) {
          cpSync(join(FIXTURES, file), join(app, file));
        }
      }, 15 * MINUTES);

      afterAll(async () => {
        await registry?.close();
        if (work !== "") rmSync(work, { recursive: true, force: true });
      });

      it("packs only what a consumer needs: dist, sources for the declaration maps, README, LICENSE", async () => {
        for (const pkg of packed) {
          const listing = await sh(work, "tar", ["-tzf", pkg.tarball]);
          const files = listing.trim().split("\n");
          console.log(`${pkg.name}: ${pkg.bytes} B, ${pkg.files} files`);
          expect(files, pkg.name).toContain("package/LICENSE");
          expect(files, pkg.name).toContain("package/README.md");
          expect(files, pkg.name).toContain("package/dist/index.js");
          expect(files, pkg.name).toContain("package/dist/index.d.ts");
          expect(files, pkg.name).toContain("package/dist/index.d.ts.map");
          const stray = files.filter((f) =>
            /\/(test|tests|fixtures)\/|tsconfig|\.tsbuildinfo$|\.test\.[jt]s$/.test(f),
          );
          expect(stray, pkg.name).toEqual([]);
        }
      });

      it("installs with no workspace link: each package is a copy of its tarball", () => {
        for (const pkg of packed) {
          const installed = join(app, "node_modules", pkg.name);
          expect(lstatSync(installed).isSymbolicLink(), pkg.name).toBe(false);
          const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
          expect(manifest, pkg.name).toEqual(pkg.manifest);
        }
        // One copy of core for the app and every adapter (a peer dependency).
        const lock = JSON.parse(readFileSync(join(app, "package-lock.json"), "utf8")) as {
          packages: Record<string, unknown>;
        };
        const cores = Object.keys(lock.packages).filter((p) =>
          p.endsWith("node_modules/@baton/core"),
        );
        expect(cores).toEqual(["node_modules/@baton/core"]);
      });

      it("runs as an ES module app on memory, Redis and PostgreSQL", async () => {
        const out = await sh(app, "node", ["esm-app.mjs"], urls);
        expect(out).toMatch(/esm memory token 1 released true/);
        expect(out).toMatch(/esm redis token \d+ released true/);
        expect(out).toMatch(/esm postgres token \d+ released true/);
        expect(out).toMatch(/esm dynamodb and azblob URLs accepted/);
      });

      it("runs from CommonJS with require()", async () => {
        const out = await sh(app, "node", ["cjs-app.cjs"], urls);
        expect(out).toMatch(/cjs memory token 1/);
        expect(out).toMatch(/cjs redis token \d+/);
      });

      for (const resolution of ["NodeNext", "Bundler"] as const) {
        it(`type-checks the README examples and a typed app, strict, ${resolution}, no skipLibCheck`, async () => {
          const examples = readmeExamples(ROOT);
          expect(examples.length).toBeGreaterThan(3);
          const dir = join(app, `ts-${resolution.toLowerCase()}`);
          mkdirSync(dir, { recursive: true });
          for (const example of examples) {
            writeFileSync(join(dir, example.fileName), `// ${example.origin}\n${example.code}`);
          }
          cpSync(join(app, "typed-app.ts"), join(dir, "typed-app.ts"));
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
          writeFileSync(
            join(dir, "tsconfig.json"),
            JSON.stringify({ compilerOptions, include: ["*.ts"] }),
          );
          await sh(dir, "node", [TSC, "-p", "tsconfig.json"]);
        });
      }

      it("runs the baton CLI installed in the project, on memory, Redis and PostgreSQL", async () => {
        const help = await sh(app, "npx", ["--no-install", "baton", "--help"]);
        expect(help).toMatch(/usage: baton <command>/);
        const printToken = [
          "node",
          "-e",
          "console.log('token=' + process.env.BATON_FENCING_TOKEN)",
        ];
        for (const url of ["memory://", urls.REDIS_URL, urls.POSTGRES_URL]) {
          const out = await sh(app, "npx", [
            "--no-install",
            "baton",
            "lock",
            "consumer-cli",
            "--backend",
            url,
            "--",
            ...printToken,
          ]);
          expect(out, url).toMatch(/token=\d+/);
        }
      });

      it("runs the baton CLI installed alone with npm install -g", async () => {
        const prefix = join(work, "global");
        await sh(work, "npm", [
          "install",
          "-g",
          "--prefix",
          prefix,
          ...registry.npmArgs,
          "@baton/cli@0.1.0",
        ]);
        const elsewhere = mkdtempSync(join(tmpdir(), "baton-global-cwd-"));
        const baton = join(prefix, "bin/baton");
        try {
          for (const url of [urls.REDIS_URL, urls.POSTGRES_URL]) {
            const quiet = await sh(elsewhere, baton, ["lock", "x", "--backend", url, "--", "true"]);
            expect(quiet.trim(), url).toBe("");
            const echo = ["sh", "-c", "echo token=$BATON_FENCING_TOKEN"];
            const out = await sh(elsewhere, baton, ["lock", "x", "--backend", url, "--", ...echo]);
            expect(out, url).toMatch(/^token=\d+$/m);
          }
        } finally {
          rmSync(elsewhere, { recursive: true, force: true });
        }
      });

      it("keeps the adapter in an esbuild bundle of an app that uses redis://", async () => {
        const outDir = mkdtempSync(join(tmpdir(), "baton-bundle-"));
        try {
          const bundle = join(outDir, "app.mjs");
          await sh(app, ESBUILD, [
            "bundle-app.mjs",
            "--bundle",
            "--platform=node",
            "--format=esm",
            "--log-level=warning",
            `--outfile=${bundle}`,
            "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
          ]);
          // Run from a folder with no node_modules: everything must be in the bundle.
          const out = await sh(outDir, "node", [bundle], urls);
          expect(out).toMatch(/bundle redis token \d+/);
        } finally {
          rmSync(outDir, { recursive: true, force: true });
        }
      });

      it("works with the app's own ioredis 5 client", async () => {
        await sh(app, "npm", [
          "install",
          "--no-audit",
          "--no-fund",
          ...registry.npmArgs,
          "ioredis@5",
        ]);
        const copies = (await sh(app, "npm", ["ls", "ioredis", "--all", "--parseable"]))
          .trim()
          .split("\n");
        expect(new Set(copies).size).toBe(1);
        const out = await sh(app, "node", ["ioredis5-app.mjs"], urls);
        expect(out).toMatch(/ioredis5 token \d+/);
        const dir = join(app, "ts-ioredis5");
        mkdirSync(dir, { recursive: true });
        cpSync(join(app, "typed-app.ts"), join(dir, "typed-app.ts"));
        const compilerOptions = {
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          types: ["node"],
        };
        writeFileSync(
          join(dir, "tsconfig.json"),
          JSON.stringify({ compilerOptions, include: ["*.ts"] }),
        );
        await sh(dir, "node", [TSC, "-p", "tsconfig.json"]);
      });
    }),
  ),
);
