import { fileURLToPath } from "node:url";

/**
 * The `node` arguments that run the module `name` (without extension) next to the module at
 * `fromUrl` in a child process. Published packages run their compiled `.js` files as they are;
 * inside the Baton workspace, where packages run from their TypeScript sources, the `.ts` file
 * runs through tsx with the `@baton/source` export condition.
 *
 * @param fromUrl - `import.meta.url` of the calling module
 * @param name - the sibling module's path relative to the caller, without extension
 * @internal
 */
export function siblingModuleArgs(fromUrl: string, name: string): string[] {
  const fromSources = fromUrl.endsWith(".ts");
  const file = fileURLToPath(new URL(`${name}${fromSources ? ".ts" : ".js"}`, fromUrl));
  return fromSources ? ["--conditions=@baton/source", "--import", "tsx", file] : [file];
}
