/**
 * Module hooks for {@link ./register-ts.mjs}: `.ts` files are transpiled with TypeScript's
 * `transpileModule` (types erased, nothing added), and a relative `./x.js` that does not exist
 * resolves to `./x.ts` (the NodeNext import style of the sources).
 */
import { readFile } from "node:fs/promises";
import ts from "typescript";

const compilerOptions = {
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ES2022,
  verbatimModuleSyntax: true,
  inlineSourceMap: true,
  inlineSources: false,
};

/** Resolves `./x.js` to `./x.ts` when only the latter exists. */
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (error) {
    const relative = specifier.startsWith("./") || specifier.startsWith("../");
    if (error?.code === "ERR_MODULE_NOT_FOUND" && relative && specifier.endsWith(".js")) {
      return await next(`${specifier.slice(0, -3)}.ts`, context);
    }
    throw error;
  }
}

/** Loads `.ts` files as ES modules, transpiled. */
export async function load(url, context, next) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return await next(url, context);
  const source = await readFile(new URL(url), "utf8");
  const { outputText } = ts.transpileModule(source, { fileName: url, compilerOptions });
  return { format: "module", source: outputText, shortCircuit: true };
}
