import ts from "typescript";

/** One name a package exports, with what it is. */
export interface ExportedName {
  readonly name: string;
  /**
   * What the name is: `class`, `function`, `const`, `enum`, `namespace`, `interface` or `type`
   * (joined with `+` when one name is several, e.g. `const+type`), prefixed by `type-only `
   * when a value is exported with `export type`, so that it exists only for the compiler.
   */
  readonly kind: string;
}

const KINDS: readonly [ts.SymbolFlags, string, "value" | "type"][] = [
  [ts.SymbolFlags.Class, "class", "value"],
  [ts.SymbolFlags.Function, "function", "value"],
  [ts.SymbolFlags.Variable, "const", "value"],
  [ts.SymbolFlags.Enum, "enum", "value"],
  [ts.SymbolFlags.ValueModule, "namespace", "value"],
  [ts.SymbolFlags.Interface, "interface", "type"],
  [ts.SymbolFlags.TypeAlias, "type", "type"],
];

/** Whether `kind` is a value a program can import at run time. */
export function isRuntimeKind(kind: string): boolean {
  return !kind.startsWith("type-only ") && /\b(class|function|const|enum|namespace)\b/.test(kind);
}

/**
 * The names the declaration file `entry` exports, read with the TypeScript compiler as a
 * consumer's compiler reads them (every `export ... from` followed to its declaration), sorted
 * by name.
 */
export function declaredExports(entry: string): ExportedName[] {
  const program = ts.createProgram([entry], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: [],
    noEmit: true,
  });
  const source = program.getSourceFile(entry);
  if (source === undefined) throw new Error(`TypeScript could not read ${entry}`);
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(source);
  if (module === undefined) throw new Error(`${entry} is not a module`);
  return checker
    .getExportsOfModule(module)
    .map((symbol) => {
      const target =
        symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      const kinds = KINDS.filter(([flag]) => target.flags & flag).map(([, kind]) => kind);
      const kind = kinds.length > 0 ? kinds.join("+") : "unknown";
      const typeOnly = (symbol.declarations ?? []).some(isTypeOnlyExport);
      const hasValue = KINDS.some(([flag, , space]) => space === "value" && target.flags & flag);
      return { name: symbol.name, kind: typeOnly && hasValue ? `type-only ${kind}` : kind };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function isTypeOnlyExport(declaration: ts.Declaration): boolean {
  if (!ts.isExportSpecifier(declaration)) return false;
  return declaration.isTypeOnly || declaration.parent.parent.isTypeOnly;
}

/** The list as committed: `name kind`, one a line; `#` starts a comment. */
export function formatExports(names: readonly ExportedName[]): string {
  return `${names.map((n) => `${n.name} ${n.kind}`).join("\n")}\n`;
}

/** Reads a list written by {@link formatExports}. */
export function parseExports(text: string): ExportedName[] {
  return text
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter((line) => line !== "")
    .map((line) => {
      const space = line.indexOf(" ");
      return space < 0
        ? { name: line, kind: "" }
        : { name: line.slice(0, space), kind: line.slice(space + 1).trim() };
    });
}

/** The lines only in `expected` (removed) and only in `actual` (added). */
export function diffExports(
  expected: readonly ExportedName[],
  actual: readonly ExportedName[],
): { removed: string[]; added: string[] } {
  const line = (n: ExportedName) => `${n.name} ${n.kind}`;
  const before = new Set(expected.map(line));
  const after = new Set(actual.map(line));
  return {
    removed: [...before].filter((l) => !after.has(l)),
    added: [...after].filter((l) => !before.has(l)),
  };
}
