import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A driver (or its types package) an adapter declares, and the range it accepts. */
export interface DeclaredDriver {
  /** The adapter that declares it, e.g. `@baton/redis`. */
  readonly adapter: string;
  readonly name: string;
  readonly range: string;
}

/** The oldest and the newest published versions of a driver inside its declared range. */
export interface DriverVersions extends DeclaredDriver {
  readonly oldest: string;
  readonly newest: string;
}

/**
 * Every non-Baton dependency of the adapters under `root`, as each `package.json` declares it,
 * and every optional peer (a driver the app brings, such as node-redis for `@baton/redis`):
 * the drivers whose oldest and newest versions a consumer may end up with.
 */
export function declaredDrivers(root: string, adapters: readonly string[]): DeclaredDriver[] {
  const drivers: DeclaredDriver[] = [];
  for (const dir of adapters) {
    const manifest = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) as {
      name: string;
      dependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
      peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    };
    const optionalPeers = Object.entries(manifest.peerDependencies ?? {}).filter(
      ([name]) => manifest.peerDependenciesMeta?.[name]?.optional === true,
    );
    for (const [name, range] of [
      ...Object.entries(manifest.dependencies ?? {}),
      ...optionalPeers,
    ]) {
      if (!name.startsWith("@baton/")) drivers.push({ adapter: manifest.name, name, range });
    }
  }
  return drivers;
}

/** Compares two plain `x.y.z` versions (pre-releases never match a caret or tilde range). */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+-]/).map(Number);
  const pb = b.split(/[.+-]/).map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Asks the registry (with `npm view`, as a user's npm would resolve the range) which published
 * versions fall inside `driver.range`, and returns the oldest and the newest of them.
 */
export async function resolveDriverVersions(
  driver: DeclaredDriver,
  env: NodeJS.ProcessEnv,
): Promise<DriverVersions> {
  const { stdout } = await run(
    "npm",
    ["view", `${driver.name}@${driver.range}`, "version", "--json"],
    { env, maxBuffer: 16 << 20, timeout: 120_000 },
  );
  const parsed = JSON.parse(stdout) as string | string[];
  const versions = (Array.isArray(parsed) ? parsed : [parsed]).sort(compareVersions);
  const oldest = versions[0];
  const newest = versions[versions.length - 1];
  if (oldest === undefined || newest === undefined) {
    throw new Error(`no published version of ${driver.name} matches ${driver.range}`);
  }
  return { ...driver, oldest, newest };
}
