#!/usr/bin/env node
/**
 * Lists the modules a package's published declarations make a consumer's TypeScript load:
 * starting at each `types` entry of the package's exports, it follows the relative imports of
 * the built `.d.ts` files and prints every bare module they name. An adapter's declarations
 * should name only `@baton/core` and `node:` modules, never the driver's own types, so that a
 * driver release with broken declarations cannot break a consumer's strict build.
 *
 *   npx tsc -b packages/redis && node scripts/declared-imports.mjs packages/redis
 *
 * Exits 1 when a declaration names a module other than `@baton/*` or a Node built-in.
 */
import { existsSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, resolve } from "node:path";

const dirs = process.argv.slice(2);
if (dirs.length === 0) {
  console.error("usage: node scripts/declared-imports.mjs PACKAGE_DIR ...");
  process.exit(2);
}
const specifier =
  /(?:from\s+|import\s*\(\s*|import\s+)["']([^"']+)["']|\/\/\/\s*<reference\s+types=["']([^"']+)["']/g;
let bad = 0;
for (const dir of dirs) {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const entries = new Set([manifest.types].filter(Boolean));
  for (const target of Object.values(manifest.exports ?? {})) {
    if (typeof target === "object" && target?.types) entries.add(target.types);
  }
  const seen = new Set();
  const bare = new Map();
  const queue = [...entries].map((e) => resolve(dir, e));
  while (queue.length > 0) {
    const file = queue.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    if (!existsSync(file)) {
      console.error(`${file}: missing (build the package first: npx tsc -b ${dir})`);
      process.exit(2);
    }
    for (const match of readFileSync(file, "utf8").matchAll(specifier)) {
      const name = match[1] ?? match[2];
      if (name.startsWith(".")) {
        queue.push(resolve(dirname(file), name.replace(/\.js$/, ".d.ts")));
      } else {
        const list = bare.get(name) ?? [];
        list.push(file.slice(resolve(dir).length + 1));
        bare.set(name, list);
      }
    }
  }
  for (const [name, files] of bare) {
    const allowed =
      name.startsWith("@baton/") || name.startsWith("node:") || builtinModules.includes(name);
    if (!allowed) bad++;
    console.log(
      `${manifest.name}: ${allowed ? "ok " : "BAD"} ${name} (${[...new Set(files)].join(", ")})`,
    );
  }
}
process.exit(bad > 0 ? 1 : 0);
