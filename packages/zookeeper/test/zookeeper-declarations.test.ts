import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import zookeeper, { type Client } from "node-zookeeper-client";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  type ClientFactory,
  ZookeeperBackend,
  type ZookeeperClientLike,
  type ZookeeperSession,
} from "../src/index.js";

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
  program.emit(undefined, (_name, text, _bom, _onError, sources) => {
    const file = sources?.[0]?.fileName;
    if (file === undefined || !file.startsWith(`${src}/`)) return;
    out.set(file.slice(src.length + 1).replace(/\.ts$/, ".d.ts"), text);
  });
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
  it("name only @baton/core, never node-zookeeper-client's types", () => {
    const imports = [...declaredImports(emitDeclarations())].sort();
    expect(imports).toEqual(["@baton/core"]);
  }, 180_000);

  it("describe a client by its shape, which node-zookeeper-client's Client has", async () => {
    expectTypeOf<Client>().toExtend<ZookeeperClientLike>();
    const client: ZookeeperClientLike = zookeeper.createClient("127.0.0.1:1");
    const factory: ClientFactory = () => zookeeper.createClient("127.0.0.1:1");
    const shared = new ZookeeperBackend({ client });
    const built = new ZookeeperBackend({ hosts: ["127.0.0.1:1"], createClient: factory });
    expectTypeOf<ZookeeperSession["client"]>().toEqualTypeOf<ZookeeperClientLike>();
    await shared.close();
    await built.close();
  });
});
