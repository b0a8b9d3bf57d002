import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** One package as `npm pack` made it. */
export interface PackedPackage {
  readonly name: string;
  readonly version: string;
  /** Path of the `.tgz`. */
  readonly tarball: string;
  /** Its size in bytes. */
  readonly bytes: number;
  /** How many files it holds. */
  readonly files: number;
  /** The package.json inside the tarball. */
  readonly manifest: Record<string, unknown>;
}

/** The published packages, in dependency order. */
export const PUBLISHED = [
  "packages/core",
  "packages/redis",
  "packages/etcd",
  "packages/zookeeper",
  "packages/postgres",
  "packages/mysql",
  "packages/dynamodb",
  "packages/azure-blob",
  "packages/cli",
  "conformance",
] as const;

/**
 * Packs the published packages of the workspace at `root` (every one, or those in `dirs`) into
 * `into` with `npm pack`, which runs each package's `prepack` (the build), exactly as
 * `npm publish` would.
 */
export function packWorkspace(
  root: string,
  into: string,
  dirs: readonly string[] = PUBLISHED,
): PackedPackage[] {
  mkdirSync(into, { recursive: true });
  const args = ["pack", "--json", "--pack-destination", into];
  for (const dir of dirs) args.push("--workspace", dir);
  const out = execFileSync("npm", args, { cwd: root, encoding: "utf8", maxBuffer: 64 << 20 });
  const json = JSON.parse(out.slice(out.indexOf("["))) as {
    name: string;
    version: string;
    filename: string;
    entryCount: number;
  }[];
  const made = new Set(readdirSync(into));
  return json.map((entry) => {
    if (!made.has(entry.filename)) throw new Error(`npm pack did not write ${entry.filename}`);
    const tarball = join(into, entry.filename);
    const manifest = JSON.parse(
      execFileSync("tar", ["-xzOf", tarball, "package/package.json"], { encoding: "utf8" }),
    ) as Record<string, unknown>;
    return {
      name: entry.name,
      version: entry.version,
      tarball,
      bytes: statSync(tarball).size,
      files: entry.entryCount,
      manifest,
    };
  });
}
