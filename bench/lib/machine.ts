import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, loadavg, release, totalmem, type } from "node:os";
import { fileURLToPath } from "node:url";
import { cpuPlacement, describePlacement } from "./cpu-placement.js";

/** Where and with what a bench ran. */
export interface MachineInfo {
  readonly date: string;
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGb: number;
  readonly os: string;
  readonly node: string;
  /** 1-minute load average when the run started. */
  readonly loadAtStart: number;
  /** Git commit of the working tree (with "+changes" when it had uncommitted edits). */
  readonly commit: string;
  /** Where servers and client ran (see cpu-placement.ts). */
  readonly placement: string;
  /** Installed versions of Baton's dependencies and the peer libraries. */
  readonly packages: Readonly<Record<string, string>>;
}

/** Packages whose installed versions the report lists. */
const PACKAGES = [
  "@baton/core",
  "ioredis",
  "etcd3",
  "node-zookeeper-client",
  "pg",
  "redlock",
  "@sesamecare-oss/redlock",
  "redis-semaphore",
  "advisory-lock",
  "tsx",
];

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL("../../", import.meta.url));

function packageVersion(name: string): string {
  try {
    const file = require.resolve(`${name}/package.json`, { paths: [root] });
    return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
  } catch {
    // Some packages do not export package.json: find it beside the entry point.
    try {
      let dir = require.resolve(name, { paths: [root] });
      for (let i = 0; i < 6; i++) {
        dir = dir.slice(0, dir.lastIndexOf("/"));
        try {
          const pkg = JSON.parse(readFileSync(`${dir}/package.json`, "utf8")) as {
            name?: string;
            version: string;
          };
          if (pkg.name === name) return pkg.version;
        } catch {
          // keep climbing
        }
      }
    } catch {
      // not installed
    }
    return "not installed";
  }
}

function gitCommit(): string {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root })
      .toString()
      .trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], {
      cwd: root,
    })
      .toString()
      .trim();
    return dirty === "" ? head : `${head}+changes`;
  } catch {
    return "unknown";
  }
}

/** Describes the machine the bench runs on and the installed packages. */
export function machineInfo(): MachineInfo {
  const list = cpus();
  return {
    date: new Date().toISOString(),
    cpu: list[0]?.model.trim() ?? "unknown",
    cores: list.length,
    memoryGb: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${type()} ${release()}`,
    node: process.version,
    loadAtStart: loadavg()[0] ?? Number.NaN,
    commit: gitCommit(),
    placement: describePlacement(cpuPlacement()),
    packages: Object.fromEntries(PACKAGES.map((p) => [p, packageVersion(p)])),
  };
}
