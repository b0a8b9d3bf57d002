import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/** True when `file` exists and is executable by this process. */
export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Finds an executable on `PATH` (plus /usr/sbin and /sbin), or checks an
 * explicit path.
 *
 * @param name - a bare program name, or a path containing a slash
 * @param env - where `PATH` is read from
 * @returns its path, or `undefined` when it is not there
 */
export function findOnPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (name.includes("/")) {
    return isExecutable(name) ? name : undefined;
  }
  const dirs = (env.PATH ?? "/usr/local/bin:/usr/bin:/bin").split(delimiter);
  for (const dir of [...dirs, "/usr/sbin", "/sbin"]) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    if (isExecutable(candidate)) {
      return candidate;
    }
  }
  return undefined;
}
