/**
 * `@baton/nestjs` as published: packed with `npm pack`, served by a registry on loopback,
 * installed by name into fresh Nest applications outside the repository (NestJS 12 with
 * @nestjs/schedule 12, and NestJS 11 with @nestjs/schedule 6, everything else from the npm
 * registry), with the harness's Redis as their store. In each, the package README's examples
 * and an application type-check strict (no skipLibCheck, experimentalDecorators and
 * emitDecoratorMetadata as Nest projects have them); the application is compiled with tsc and run: its cron runs, its leader leads,
 * its locked endpoint serialises requests, and SIGTERM closes it with the leader stepping down.
 */
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describeBackend } from "@baton/conformance/harness";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanEnv, sh } from "../src/consumer-shell.js";
import { packWorkspace } from "../src/pack-workspace.js";
import { readmeExamples } from "../src/readme-examples.js";
import { type ScopedRegistry, startScopedRegistry } from "../src/scoped-registry.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const MINUTES = 60_000;
const PACKAGES = ["packages/core", "packages/redis", "packages/postgres", "packages/nestjs"];

/** The Nest releases an application may have, with the schedule and config releases they pair with. */
const NEST_LINES = [
  { nest: "12", schedule: "12", config: "12" },
  { nest: "11", schedule: "6", config: "4" },
] as const;

/** Compiler options of a strict Nest project; `emit` writes JavaScript into `dist`. */
function tsconfig(include: string[], emit: boolean) {
  return {
    compilerOptions: {
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: false,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      target: "ES2022",
      lib: ["ES2022", "ESNext.Disposable", "DOM"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      types: ["node"],
      ...(emit ? { outDir: "dist", rootDir: "." } : { noEmit: true }),
    },
    include,
  };
}

interface AppEvent {
  readonly event: string;
  readonly slot?: string;
  readonly term?: string;
  readonly url?: string;
  readonly injected?: boolean;
}

/** Starts the compiled app, waits until it serves, and returns its events and a stop. */
async function startApp(dir: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ["dist/main.js"], {
    cwd: dir,
    env: { ...cleanEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const events: AppEvent[] = [];
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<AppEvent>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the app exited (${code}): ${stderr}`)));
    let buffer = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      buffer += chunk;
      for (let at = buffer.indexOf("\n"); at >= 0; at = buffer.indexOf("\n")) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        if (!line.startsWith("{")) continue;
        const event = JSON.parse(line) as AppEvent;
        events.push(event);
        if (event.event === "ready") resolve(event);
      }
    });
  });
  const stop = async () => {
    child.kill("SIGTERM");
    return { ...(await exited), stderr };
  };
  try {
    return { ready: await ready, events, stop };
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
}

// The apps run against the harness's Redis: describeBackend skips the block when it is not
// selected, and fails it under CI=true when its server is missing.
describeBackend("redis", (redisUrl) =>
  describe.sequential("@baton/nestjs installed from its tarball into fresh Nest apps", {
    timeout: 6 * MINUTES,
  }, () => {
    let work = "";
    let registry: ScopedRegistry;
    const apps = new Map<string, string>();

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), "baton-nest-consumer-"));
      const packed = packWorkspace(ROOT, join(work, "tarballs"), PACKAGES);
      registry = await startScopedRegistry(packed);
      const batons = packed.map((p) => `${p.name}@${p.version}`);
      await Promise.all(
        NEST_LINES.map(async (line) => {
          const dir = join(work, `nest-${line.nest}`);
          mkdirSync(dir, { recursive: true });
          writeFileSync(
            join(dir, "package.json"),
            `${JSON.stringify({ name: "nest-app", private: true, type: "module" }, null, 2)}\n`,
          );
          await sh(dir, "npm", [
            "install",
            "--no-audit",
            "--no-fund",
            ...registry.npmArgs,
            ...batons,
            `@nestjs/common@${line.nest}`,
            `@nestjs/core@${line.nest}`,
            `@nestjs/platform-express@${line.nest}`,
            `@nestjs/schedule@${line.schedule}`,
            `@nestjs/config@${line.config}`,
            "reflect-metadata@0.2",
            "rxjs@7",
            "prom-client@15",
            "@types/node@20",
          ]);
          apps.set(line.nest, dir);
        }),
      );
    }, 10 * MINUTES);

    afterAll(async () => {
      await registry?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    for (const line of NEST_LINES) {
      describe(`NestJS ${line.nest}, @nestjs/schedule ${line.schedule}`, () => {
        it("the README's examples type-check strict, without skipLibCheck", async () => {
          const dir = apps.get(line.nest) as string;
          const blocks = readmeExamples(ROOT, ["packages/nestjs/README.md"]);
          expect(blocks.length).toBeGreaterThanOrEqual(5);
          mkdirSync(join(dir, "readme"), { recursive: true });
          for (const block of blocks)
            writeFileSync(join(dir, "readme", block.fileName), block.code);
          writeFileSync(
            join(dir, "tsconfig.readme.json"),
            JSON.stringify(tsconfig(["readme/*.ts"], false)),
          );
          const output = await sh(dir, "node", [TSC, "-p", "tsconfig.readme.json"]).catch(
            (error: Error) => error.message,
          );
          expect(output.split("\n").filter((l) => /error TS\d+/.test(l))).toEqual([]);
          const installed = JSON.parse(
            readFileSync(join(dir, "node_modules/@nestjs/core/package.json"), "utf8"),
          ) as { version: string };
          console.info(
            `[baton nestjs packaging] README type-checks with @nestjs/core ${installed.version}`,
          );
          expect(installed.version.startsWith(`${line.nest}.`)).toBe(true);
        });

        it("an app compiled with tsc runs its cron once per tick, its leader, and its locked endpoint", async () => {
          const dir = apps.get(line.nest) as string;
          cpSync(join(ROOT, "packaging/fixtures/nestjs-app/main.ts"), join(dir, "main.ts"));
          writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(tsconfig(["main.ts"], true)));
          await sh(dir, "node", [TSC, "-p", "tsconfig.json"]);
          const app = await startApp(dir, { BATON_URL: redisUrl, RUN_ID: `nest-${line.nest}` });
          expect(app.ready.injected).toBe(true);
          const replies = await Promise.all(
            Array.from({ length: 10 }, async () => {
              const response = await fetch(`${app.ready.url}/counters/a/increment`, {
                method: "POST",
              });
              expect(response.status).toBe(201);
              return ((await response.json()) as { value: number }).value;
            }),
          );
          expect([...replies].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
          const until = Date.now() + 20_000;
          while (app.events.filter((e) => e.event === "ran").length < 2 && Date.now() < until) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          const { code, signal, stderr } = await app.stop();
          const slots = app.events.filter((e) => e.event === "ran").map((e) => e.slot);
          expect(slots.length).toBeGreaterThanOrEqual(2);
          expect(new Set(slots).size).toBe(slots.length);
          expect(app.events.filter((e) => e.event === "leading")).toHaveLength(1);
          expect(app.events.filter((e) => e.event === "stepped-down")).toHaveLength(1);
          // Nest closes the app on SIGTERM, then lets the signal end the process.
          expect({ code, signal }).toEqual({ code: null, signal: "SIGTERM" });
          // Nothing on stderr but the cron package's notes on a tick a busy machine ran late.
          const lines = stderr.split("\n").filter((l) => l.trim() !== "");
          expect(lines.filter((l) => !l.startsWith("[Cron] Missed execution deadline"))).toEqual(
            [],
          );
        });
      });
    }
  }),
);
