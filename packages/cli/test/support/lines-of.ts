import { existsSync, readFileSync } from "node:fs";

/** The non-empty lines of the log `file` (none while it does not exist yet). */
export function linesOf(file: string): string[] {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
}
