import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  migrate,
  type PgClientLike,
  type PgConnectionConfig,
  type PgPoolLike,
  PostgresBackend,
  pgFence,
  type Queryable,
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
  it("name only @baton/core and Node's own modules, never pg's types", () => {
    const imports = [...declaredImports(emitDeclarations())].sort();
    expect(imports).toEqual(["@baton/core", "node:tls"]);
  }, 180_000);

  it("describe pools and clients by their shape, which pg's Pool, Client and PoolClient have", async () => {
    expectTypeOf<pg.Pool>().toExtend<PgPoolLike>();
    expectTypeOf<pg.Pool>().toExtend<Queryable>();
    expectTypeOf<pg.Client>().toExtend<Queryable>();
    expectTypeOf<pg.PoolClient>().toExtend<PgClientLike>();
    expectTypeOf<pg.ClientConfig>().toExtend<PgConnectionConfig>();
    expectTypeOf<pg.Pool["options"]>().toExtend<PgConnectionConfig>();
    const pool = new pg.Pool({ host: "127.0.0.1", port: 1, database: "app" });
    const client = new pg.Client({ host: "127.0.0.1", port: 1 });
    const config: pg.ClientConfig = { host: "127.0.0.1", port: 1, ssl: false };
    const fromPool = new PostgresBackend({ pool });
    expect(fromPool.options.pool).toBe(pool);
    expect(fromPool.options.connection).toMatchObject({ host: "127.0.0.1", port: 1 });
    expect(new PostgresBackend({ config }).options.connection).toMatchObject(config);
    const fence = pgFence(pool);
    // A transaction's client is the pool's own type when the caller names it.
    expectTypeOf(fence.transaction<void, pg.PoolClient>)
      .parameter(2)
      .parameter(0)
      .toEqualTypeOf<pg.PoolClient>();
    // migrate() and a fence's check() take a client or a pool.
    expectTypeOf(migrate).toBeCallableWith(client);
    expectTypeOf(migrate).toBeCallableWith(pool);
    expectTypeOf(fence.check).toBeCallableWith(client, "resource", 1n);
    await pool.end();
    await fromPool.close();
  });
});
