import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Cluster, Redis } from "ioredis";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import { RedisBackend, type RedisClientLike, RedlockBackend } from "../src/index.js";

const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

/**
 * The package's declarations as `tsc` emits them for publishing, keyed by path relative to
 * `src` (`index.d.ts`, ...), from the sources in memory.
 */
function emitDeclarations(): Map<string, string> {
  const program = ts.createProgram([join(src, "index.ts")], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ["@baton/source"],
    strict: true,
    skipLibCheck: true,
    declaration: true,
    emitDeclarationOnly: true,
    types: ["node"],
    outDir: join(src, "../.declarations"),
  });
  const out = new Map<string, string>();
  // Only this package's files: core's sources are in the program too, not to be emitted.
  for (const file of program.getSourceFiles()) {
    if (!file.fileName.startsWith(`${src}/`)) continue;
    const relative = file.fileName.slice(src.length + 1).replace(/\.ts$/, ".d.ts");
    program.emit(file, (_name, text) => out.set(relative, text), undefined, true);
  }
  return out;
}

/** Bare module names the declarations reachable from `index.d.ts` import. */
function declaredImports(files: Map<string, string>): Set<string> {
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
  return bare;
}

describe("published declarations", () => {
  it("name only @baton/core, never the driver's own types", () => {
    const imports = declaredImports(emitDeclarations());
    expect([...imports]).toEqual(["@baton/core"]);
    // Type-checking the package takes a few seconds, much longer on a loaded machine.
  }, 240_000);

  it("describe a client by its shape, which ioredis' Redis and Cluster have", () => {
    expectTypeOf<Redis>().toExtend<RedisClientLike>();
    expectTypeOf<Cluster>().toExtend<RedisClientLike>();
    const client: RedisClientLike = new Redis({ lazyConnect: true });
    const cluster: RedisClientLike = new Cluster([{ host: "127.0.0.1", port: 1 }], {
      lazyConnect: true,
    });
    const nodes: RedisClientLike[] = [1, 2, 3].map(() => new Redis({ lazyConnect: true }));
    expect(new RedisBackend({ client }).client).toBe(client);
    expect(new RedisBackend({ client: cluster }).client).toBe(cluster);
    expect(new RedlockBackend({ clients: nodes }).nodes).toEqual(nodes);
  });
});
