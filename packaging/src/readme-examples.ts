import { readFileSync } from "node:fs";
import { join } from "node:path";

/** One ```ts block of a README. */
export interface ReadmeExample {
  /** Where it stands, e.g. `packages/redis/README.md:42`. */
  readonly origin: string;
  /** A file name for it, unique and stable. */
  readonly fileName: string;
  readonly code: string;
}

/** The READMEs (and guides) whose TypeScript examples users copy. */
export const READMES = [
  "README.md",
  "docs/production.md",
  "packages/core/README.md",
  "packages/redis/README.md",
  "packages/etcd/README.md",
  "packages/zookeeper/README.md",
  "packages/postgres/README.md",
  "packages/dynamodb/README.md",
  "packages/azure-blob/README.md",
  "packages/cli/README.md",
  "conformance/README.md",
] as const;

/**
 * Every ```ts (or ```typescript) block of the READMEs under `root` (those of {@link READMES},
 * or `readmes`), each a whole module.
 */
export function readmeExamples(
  root: string,
  readmes: readonly string[] = READMES,
): ReadmeExample[] {
  const examples: ReadmeExample[] = [];
  for (const readme of readmes) {
    const lines = readFileSync(join(root, readme), "utf8").split("\n");
    let start = -1;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] ?? "";
      if (start < 0 && /^```(ts|typescript)\s*$/.test(line)) start = i + 1;
      else if (start >= 0 && /^```\s*$/.test(line)) {
        const slug = readme.replace(/\/?README\.md$/, "").replace(/[^a-z0-9]+/gi, "-") || "root";
        examples.push({
          origin: `${readme}:${start}`,
          fileName: `readme-${slug}-${start}.ts`,
          code: `${lines.slice(start, i).join("\n")}\n`,
        });
        start = -1;
      }
    }
  }
  return examples;
}
