import { join } from "node:path";

/**
 * The bare module names (`@baton/core`, `node:tls`, a driver's package, ...) that a package's
 * published declarations import, sorted: what a user's type-check has to resolve when they
 * install the package. An adapter's test checks this names no driver module, so the driver
 * stays an optional peer the user brings, never a types dependency.
 *
 * The declarations are emitted in memory from the package's sources as `tsc` would publish
 * them (NodeNext, strict, the `@baton/source` condition), and only those reachable from
 * `index.d.ts` are read. Needs the `typescript` package installed; type-checking a package
 * takes seconds, much longer on a loaded machine, so give the calling test a generous timeout.
 *
 * @param srcDir - absolute path of the package's `src` directory, holding `index.ts`
 * @returns the bare module specifiers, sorted
 * @throws Error when a declaration file reachable from `index.d.ts` was not emitted
 *
 * @example
 * const src = fileURLToPath(new URL("../src", import.meta.url));
 * expect(await publishedDeclarationImports(src)).toEqual(["@baton/core"]);
 */
export async function publishedDeclarationImports(srcDir: string): Promise<string[]> {
  const files = await emitDeclarations(srcDir);
  const specifier = /(?:from\s+|import\s*\(\s*|import\s+)["']([^"']+)["']/g;
  const bare = new Set<string>();
  const seen = new Set<string>();
  const queue = ["index.d.ts"];
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const text = files.get(file);
    if (text === undefined) throw new Error(`no declarations emitted for ${file}`);
    for (const match of text.matchAll(specifier)) {
      const name = match[1] as string;
      if (name.startsWith("./")) queue.push(name.slice(2).replace(/\.js$/, ".d.ts"));
      else bare.add(name);
    }
  }
  return [...bare].sort();
}

/**
 * The package's declarations, keyed by path relative to `srcDir` (`index.d.ts`, ...). Loads
 * `typescript` only when called, so the rest of the harness does not need it.
 */
async function emitDeclarations(srcDir: string): Promise<Map<string, string>> {
  const { default: ts } = await import("typescript");
  const program = ts.createProgram([join(srcDir, "index.ts")], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ["@baton/source"],
    strict: true,
    skipLibCheck: true,
    declaration: true,
    emitDeclarationOnly: true,
    types: ["node"],
    outDir: join(srcDir, "../.declarations"),
  });
  const out = new Map<string, string>();
  // Only this package's files: @baton/core's sources are in the program too, not to be emitted.
  for (const file of program.getSourceFiles()) {
    if (!file.fileName.startsWith(`${srcDir}/`)) continue;
    const relative = file.fileName.slice(srcDir.length + 1).replace(/\.ts$/, ".d.ts");
    program.emit(file, (_name, text) => out.set(relative, text), undefined, true);
  }
  return out;
}
