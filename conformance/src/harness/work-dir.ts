import { readdirSync, rmSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Set to `1` to keep server data and logs even when everything passed. */
export const KEEP_LOGS_ENV = "BATON_KEEP_LOGS";

/** True when `BATON_KEEP_LOGS` asks to keep the servers' temp dir. */
export function keepLogsRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env[KEEP_LOGS_ENV];
  return value !== undefined && value !== "" && value !== "0" && value.toLowerCase() !== "false";
}

/**
 * Creates a fresh temp dir under `os.tmpdir()` for server data and logs.
 * It is made world-traversable (0755) so servers that drop privileges
 * (PostgreSQL runs as `postgres`) can reach their own subdirectories.
 *
 * @param prefix - the directory name prefix
 * @returns its absolute path
 */
export async function createWorkDir(prefix = "baton-servers-"): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await chmod(dir, 0o755);
  return dir;
}

/**
 * Creates (if needed) a world-traversable subdirectory.
 *
 * @returns its absolute path
 */
export async function makeSubdir(parent: string, ...parts: string[]): Promise<string> {
  const dir = join(parent, ...parts);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await chmod(dir, 0o755);
  return dir;
}

/** Deletes a work dir and everything in it; never throws (a failure is reported on stderr). */
export async function removeWorkDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch((error: Error) => {
    process.stderr.write(`[baton harness] could not remove ${dir}: ${error.message}\n`);
  });
}

/**
 * Deletes the bulky server data from a work dir, keeping logs and configs.
 * The layout is `<dir>/<kind>/<member>/data` for every member (an etcd
 * member preallocates a 64 MB WAL; an initdb cluster is about 40 MB).
 * Synchronous, so exit handlers can use it; never throws.
 */
export function pruneServerData(dir: string): void {
  try {
    for (const kind of readdirSync(dir, { withFileTypes: true })) {
      if (!kind.isDirectory()) continue;
      for (const member of readdirSync(join(dir, kind.name), { withFileTypes: true })) {
        if (!member.isDirectory()) continue;
        rmSync(join(dir, kind.name, member.name, "data"), { recursive: true, force: true });
      }
    }
  } catch {
    // Best effort: keeping too much is better than failing a teardown.
  }
}
