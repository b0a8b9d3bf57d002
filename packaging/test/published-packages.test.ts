/**
 * What we would publish, tested as published: every package packed with `npm pack`, served by a
 * registry on loopback, installed by name into a fresh project outside the repository (other
 * dependencies from the npm registry, no workspace links), then used there the ways consumers
 * use it: ESM, CommonJS, strict TypeScript (NodeNext and Bundler, no skipLibCheck) over the
 * README examples, over an app that reaches every backend by URL (which must not make
 * TypeScript read any driver's declarations) and over apps passing their own clients with the
 * oldest and the newest version of every driver range the adapters declare, the `baton` CLI
 * (local and `npm install -g`), and the README's esbuild recipe for a bundled service.
 */
import { spawn } from "node:child_process";
import {
  cpSync,
  lstatSync,
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
import { describeBackend } from "@baton/conformance/harness";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanEnv, sh as shellCommand } from "../src/consumer-shell.js";
import {
  type DriverVersions,
  declaredDrivers,
  resolveDriverVersions,
} from "../src/driver-versions.js";
import { type PackedPackage, PUBLISHED, packWorkspace } from "../src/pack-workspace.js";
import { readmeExamples } from "../src/readme-examples.js";
import { type ScopedRegistry, startScopedRegistry } from "../src/scoped-registry.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const FIXTURES = join(ROOT, "packaging/fixtures");
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const ESBUILD = join(ROOT, "node_modules/esbuild/bin/esbuild");
const MINUTES = 60_000;

/** Runs a command in a consumer's shell and prints the tail of its output. */
async function sh(cwd: string, file: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const output = await shellCommand(cwd, file, args, env);
  console.log(`$ ${[file, ...args].join(" ").replace(ROOT, ".")}\n${output.trim().slice(-2_000)}`);
  return output;
}

/** A command's exit code and its stdout + stderr, whether it failed or not. */
async function shResult(cwd: string, file: string, args: string[]) {
  try {
    const output = await sh(cwd, file, args);
    return { code: 0, output };
  } catch (error) {
    return { code: 1, output: (error as Error).message };
  }
}

type Resolution = "NodeNext" | "Bundler";
const RESOLUTIONS: readonly Resolution[] = ["NodeNext", "Bundler"];

/**
 * The declarations of the drivers (and of what they depend on): an adapter's published
 * declarations describe a client by the shape Baton uses, so an app that names no driver
 * itself never makes TypeScript read these, and a driver release with broken declarations
 * cannot break its build.
 */
const DRIVER_DECLARATIONS =
  /node_modules\/(ioredis|@ioredis|redis|@redis|redis-errors|@types\/redis-errors|pg|pg-[a-z-]+|@types\/pg|mysql2|etcd3|@grpc|protobufjs|node-zookeeper-client|@types\/node-zookeeper-client|@aws-sdk|@smithy|@aws-crypto|@azure|prom-client)\//;

/**
 * Type-checks `dir`'s `*.ts` as a strict consumer would (no skipLibCheck), with `--explainFiles`
 * so that the files TypeScript read, and why, come back with the outcome.
 */
async function typeCheck(dir: string, resolution: Resolution) {
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
  const { code, output } = await shResult(dir, "node", [TSC, "-p", config, "--explainFiles"]);
  // --explainFiles prints each file read on a line of its own, then why, indented.
  const read = new Map<string, string[]>();
  let current: string[] = [];
  for (const line of output.split("\n")) {
    if (/^\s/.test(line)) current.push(line.trim());
    else if (/\.d\.[cm]?ts$|\.ts$/.test(line.trim())) {
      current = [];
      read.set(line.trim(), current);
    }
  }
  const errors = output.split("\n").filter((line) => /error TS\d+/.test(line));
  return { resolution, code, errors, read };
}

/** Creates a consumer project in `dir` and installs `specs` into it (the `@baton` scope from `registry`). */
async function installProject(dir: string, registry: ScopedRegistry, specs: string[]) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify({ name: "consumer-app", private: true, type: "module" }, null, 2)}\n`,
  );
  await sh(dir, "npm", ["install", "--no-audit", "--no-fund", ...registry.npmArgs, ...specs]);
}

/** The installed version of `name` in the project at `dir`. */
function installedVersion(dir: string, name: string): string {
  return JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8")).version;
}

const ADAPTERS = PUBLISHED.filter((p) => p.startsWith("packages/") && !/core|cli/.test(p));

// Tried against the harness's Redis, PostgreSQL and MariaDB: describeBackend skips the block
// when they are not selected, and fails it under CI=true when their servers are missing.
describeBackend("redis", (redisUrl) =>
  describeBackend("postgres", (postgresUrl) =>
    describeBackend("mysql", (mysqlUrl) =>
      describe.sequential("published packages, installed from a registry into a fresh project", {
        timeout: 5 * MINUTES,
      }, () => {
        const urls = { REDIS_URL: redisUrl, POSTGRES_URL: postgresUrl, MYSQL_URL: mysqlUrl };
        let work = "";
        let app = "";
        let packed: PackedPackage[] = [];
        let registry: ScopedRegistry;
        let drivers: DriverVersions[] = [];
        const sides = { oldest: "", newest: "" };
        let ioredis61 = "";

        beforeAll(async () => {
          const started = Date.now();
          work = mkdtempSync(join(tmpdir(), "baton-consumer-"));
          packed = packWorkspace(ROOT, join(work, "tarballs"));
          registry = await startScopedRegistry(packed);
          drivers = await Promise.all(
            declaredDrivers(ROOT, ADAPTERS).map((d) => resolveDriverVersions(d, cleanEnv())),
          );
          const batons = packed.map((p) => `${p.name}@${p.version}`);
          const adapters = packed
            .filter((p) => p.name !== "@baton/cli" && p.name !== "@baton/conformance")
            .map((p) => `${p.name}@${p.version}`);
          app = join(work, "app");
          sides.oldest = join(work, "oldest-drivers");
          sides.newest = join(work, "newest-drivers");
          ioredis61 = join(work, "ioredis-6.1.0");
          // Types an app that builds its own pg or ZooKeeper client installs, unless the adapter
          // already brings them.
          const declared = new Set(drivers.map((d) => d.name));
          const appTypes = ["@types/pg", "@types/node-zookeeper-client"].filter(
            (t) => !declared.has(t),
          );
          // The installs are independent: run them side by side.
          await Promise.all([
            // The app reaches every backend by URL: the drivers are only the adapters' own
            // dependencies, at whatever versions npm resolves (the newest of each range).
            // prom-client is there for metrics, and vitest and vite as a Node 20 app pins them
            // (the conformance package's peer).
            installProject(app, registry, [
              ...batons,
              // The README examples that build their own pg pool or ZooKeeper client import
              // those drivers, whose types come apart from them.
              ...appTypes,
              "@types/node@20",
              "prom-client",
              // The README examples that pass the app's own node-redis client or mysql2 pool
              // import them.
              ...drivers
                .filter((d) => d.name === "redis" || d.name === "mysql2")
                .map((d) => `${d.name}@${d.newest}`),
              "vitest@4.1.12",
              "vite@8.3.8",
            ]),
            ...(["oldest", "newest"] as const).map((side) =>
              installProject(sides[side], registry, [
                ...adapters,
                ...drivers.map((d) => `${d.name}@${d[side]}`),
                ...appTypes,
                "@types/node@20",
                // As the Install section says: an app that imports ioredis 6.1 needs these.
                ...(side === "newest" ? ["@types/redis-errors"] : []),
              ]),
            ),
            installProject(ioredis61, registry, [
              ...adapters.filter((a) => /^@baton\/(core|redis)@/.test(a)),
              "ioredis@6.1.0",
              "@types/node@20",
            ]),
          ]);
          for (const file of ["esm-app.mjs", "cjs-app.cjs", "bundle-app.mjs"]) {
            cpSync(join(FIXTURES, file), join(app, file));
          }
          for (const dir of [sides.oldest, sides.newest]) {
            for (const file of ["own-clients-app.ts", "own-clients-app.mjs", "bill-once.ts"]) {
              cpSync(join(FIXTURES, file), join(dir, file));
            }
          }
          cpSync(join(FIXTURES, "ioredis-app.ts"), join(ioredis61, "ioredis-app.ts"));
          console.log(
            `set-up (pack, resolve, four installs) took ${Math.round((Date.now() - started) / 1000)} s; drivers:\n${drivers
              .map((d) => `  ${d.adapter}: ${d.name}@${d.range} -> ${d.oldest} .. ${d.newest}`)
              .join("\n")}`,
          );
        }, 15 * MINUTES);

        // Five installed projects to delete: on a loaded machine that takes longer than a minute.
        afterAll(async () => {
          await registry?.close();
          if (work !== "") rmSync(work, { recursive: true, force: true });
        }, 5 * MINUTES);

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

        it("runs as an ES module app on memory, Redis, PostgreSQL and MySQL/MariaDB", async () => {
          const out = await sh(app, "node", ["esm-app.mjs"], urls);
          expect(out).toMatch(/esm memory token 1 released true/);
          expect(out).toMatch(/esm redis token \d+ released true/);
          expect(out).toMatch(/esm postgres token \d+ released true/);
          expect(out).toMatch(/esm mysql token \d+ released true/);
          expect(out).toMatch(/esm mariadb row-lease token \d+ released true/);
          expect(out).toMatch(/esm dynamodb and azblob URLs accepted/);
        });

        it("runs from CommonJS with require()", async () => {
          const out = await sh(app, "node", ["cjs-app.cjs"], urls);
          expect(out).toMatch(/cjs memory token 1/);
          expect(out).toMatch(/cjs redis token \d+/);
        });

        it("type-checks an app that uses every adapter by URL, strict, without reading any driver's declarations", async () => {
          const dir = join(app, "ts-url-only");
          mkdirSync(dir, { recursive: true });
          for (const file of ["url-app.ts", "bill-once.ts"]) {
            cpSync(join(FIXTURES, file), join(dir, file));
          }
          const checks = await Promise.all(RESOLUTIONS.map((r) => typeCheck(dir, r)));
          for (const check of checks) {
            const drivers = [...check.read].filter(([file]) => DRIVER_DECLARATIONS.test(file));
            // Shown first: the driver files a Baton declaration imports, where the fault is.
            const fromBaton = drivers.flatMap(([file, why]) => {
              const byBaton = why.filter((w) => w.includes("node_modules/@baton/"));
              return byBaton.length > 0 ? [`${file}: ${byBaton.join("; ")}`] : [];
            });
            console.log(`${check.resolution}: ${check.read.size} files read`);
            expect(check.read.size, check.resolution).toBeGreaterThan(10);
            expect(
              { importedByBaton: fromBaton, all: drivers.slice(0, 3).map(([file]) => file) },
              `${check.resolution}: ${drivers.length} driver declaration files read`,
            ).toEqual({ importedByBaton: [], all: [] });
            expect(check.errors, check.resolution).toEqual([]);
            expect(check.code, check.resolution).toBe(0);
          }
        });

        it("type-checks the README examples, strict, NodeNext and Bundler, no skipLibCheck", async () => {
          const examples = readmeExamples(ROOT);
          expect(examples.length).toBeGreaterThan(3);
          const dir = join(app, "ts-readme");
          mkdirSync(dir, { recursive: true });
          for (const example of examples) {
            writeFileSync(join(dir, example.fileName), `// ${example.origin}\n${example.code}`);
          }
          writeFileSync(join(dir, "docs-testing.test.ts"), testingGuide());
          const checks = await Promise.all(RESOLUTIONS.map((r) => typeCheck(dir, r)));
          for (const check of checks) {
            expect(check.errors, check.resolution).toEqual([]);
            expect(check.code, check.resolution).toBe(0);
          }
        });

        it("runs the testing guide's tests with vitest against the published packages", async () => {
          const dir = join(app, "guide");
          mkdirSync(dir, { recursive: true });
          writeFileSync(join(dir, "billing.test.ts"), testingGuide());
          const colored = await sh(app, "npx", ["--no-install", "vitest", "run", "guide/"], {
            FORCE_COLOR: "0",
            NO_COLOR: "1",
          });
          const out = colored.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), "");
          expect(out).toMatch(/Tests\s+\d+ passed \(\d+\)/);
          expect(out).not.toMatch(/failed/);
        });

        for (const side of ["oldest", "newest"] as const) {
          it(`type-checks and runs an app passing its own clients, with the ${side} driver of every range`, async () => {
            const dir = sides[side];
            for (const d of drivers) {
              expect(installedVersion(dir, d.name), `${d.name}@${d.range}`).toBe(d[side]);
            }
            const checks = await Promise.all(RESOLUTIONS.map((r) => typeCheck(dir, r)));
            for (const check of checks) {
              expect(check.errors, `${side}, ${check.resolution}`).toEqual([]);
              expect(check.code, `${side}, ${check.resolution}`).toBe(0);
            }
            const out = await sh(dir, "node", ["own-clients-app.mjs"], urls);
            for (const name of ["ioredis", "redis", "pg", "mysql2", "mysql2 row-lease"]) {
              const [driver, mode] = name.split(" ");
              const version = drivers.find((d) => d.name === driver)?.[side];
              const line = `${driver} ${version}${mode ? ` ${mode}` : ""}`;
              expect(out).toMatch(new RegExp(`^${line} token \\d+ released true$`, "m"));
            }
            const mysql2 = drivers.find((d) => d.name === "mysql2")?.[side];
            expect(out).toMatch(
              new RegExp(`^mysql2 ${mysql2} fence stale StaleTokenError current written$`, "m"),
            );
          });
        }

        it("with ioredis 6.1.0, an app importing ioredis builds strictly once @types/redis-errors is installed", async () => {
          expect(installedVersion(ioredis61, "ioredis")).toBe("6.1.0");
          const without = await typeCheck(ioredis61, "NodeNext");
          // ioredis 6.1.0's own declarations import the untyped redis-errors.
          expect(without.code).toBe(1);
          expect(without.errors.join("\n")).toMatch(/TS7016.*'redis-errors'/);
          expect(without.errors.every((e) => e.includes("node_modules/ioredis/"))).toBe(true);
          await sh(ioredis61, "npm", [
            "install",
            "--no-audit",
            "--no-fund",
            ...registry.npmArgs,
            "@types/redis-errors",
          ]);
          const checks = await Promise.all(RESOLUTIONS.map((r) => typeCheck(ioredis61, r)));
          for (const check of checks) {
            expect(check.errors, check.resolution).toEqual([]);
            expect(check.code, check.resolution).toBe(0);
          }
        });

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
              const quiet = await sh(elsewhere, baton, [
                "lock",
                "x",
                "--backend",
                url,
                "--",
                "true",
              ]);
              expect(quiet.trim(), url).toBe("");
              const echo = ["sh", "-c", "echo token=$BATON_FENCING_TOKEN"];
              const out = await sh(elsewhere, baton, [
                "lock",
                "x",
                "--backend",
                url,
                "--",
                ...echo,
              ]);
              expect(out, url).toMatch(/^token=\d+$/m);
            }
          } finally {
            rmSync(elsewhere, { recursive: true, force: true });
          }
        });

        it("bundles a service using every adapter with the README's esbuild recipe, and runs it with no node_modules", async () => {
          const deploy = mkdtempSync(join(tmpdir(), "baton-bundle-"));
          try {
            // The recipe of the root README's "Deploying" section.
            const recipe = [
              "--bundle",
              "--platform=node",
              "--format=esm",
              "--target=node20.19",
              `--banner:js="${ESBUILD_BANNER}"`,
              "--define:__dirname=import.meta.dirname",
            ];
            const readme = readFileSync(join(ROOT, "README.md"), "utf8");
            const documented = readme.match(/^```sh\n(npx esbuild [\s\S]*?)^```$/m)?.[1] ?? "";
            for (const arg of [...recipe, "cp -r node_modules/etcd3/proto deploy/proto"]) {
              expect(documented, "the README's esbuild recipe").toContain(arg);
            }
            await sh(app, ESBUILD, [
              "bundle-app.mjs",
              ...recipe.map((arg) => arg.replace(/="(.*)"$/, "=$1")),
              "--log-level=warning",
              `--outfile=${join(deploy, "dist/app.mjs")}`,
            ]);
            cpSync(join(app, "node_modules/etcd3/proto"), join(deploy, "proto"), {
              recursive: true,
            });
            expect(readdirSync(deploy).sort()).toEqual(["dist", "proto"]);
            const service = await runUntil(
              deploy,
              join(deploy, "dist/app.mjs"),
              urls,
              /leader term/,
            );
            expect(service.output).toMatch(/bundle redis token \d+/);
            expect(service.output).toMatch(/bundle postgres token \d+/);
            expect(service.output).toMatch(/bundle etcd loaded/);
            expect(service.output).toMatch(/bundle dynamodb and azblob URLs accepted/);
            // A deploy stops the old process with SIGTERM: it steps down, then exits.
            const stopped = await service.stop("SIGTERM");
            expect(stopped.output).toMatch(/bundle term \d+ ended/);
            expect(stopped.signal ?? stopped.code).toBe("SIGTERM");
          } finally {
            rmSync(deploy, { recursive: true, force: true });
          }
        });
      }),
    ),
  ),
);

/** The code blocks of docs/testing.md put together: one vitest file, as the guide says. */
function testingGuide(): string {
  const guide = readFileSync(join(ROOT, "docs/testing.md"), "utf8");
  return [...guide.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "").join("\n");
}

/** The banner of the esbuild recipe: `require` for the CommonJS drivers (ioredis, pg, etcd3). */
const ESBUILD_BANNER =
  "import { createRequire as __batonCreateRequire } from 'node:module'; const require = __batonCreateRequire(import.meta.url);";

/**
 * Starts `node script` in `cwd`, resolves once its output matches `ready` (rejects if it exits
 * first or takes over a minute), and gives a way to signal it and wait for its exit.
 */
function runUntil(cwd: string, script: string, env: NodeJS.ProcessEnv, ready: RegExp) {
  const child = spawn("node", [script], { cwd, env: { ...cleanEnv(), ...env } });
  let output = "";
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return new Promise<{
    output: string;
    stop(signal: NodeJS.Signals): Promise<{
      output: string;
      code: number | null;
      signal: NodeJS.Signals | null;
    }>;
  }>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${script} did not print ${ready} within a minute:\n${output}`));
    }, MINUTES);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve({
          output,
          async stop(signal) {
            child.kill(signal);
            const killer = setTimeout(() => child.kill("SIGKILL"), MINUTES / 2);
            const result = await exited;
            clearTimeout(killer);
            console.log(`$ node ${script} (${signal})\n${output.trim().slice(-2_000)}`);
            return { output, ...result };
          },
        });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code ?? signal}) before ${ready}:\n${output}`));
    });
  });
}
