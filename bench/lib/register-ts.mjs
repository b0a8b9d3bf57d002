/**
 * `node --import ./bench/lib/register-ts.mjs`: runs the bench's TypeScript (and the workspace
 * packages' sources) through TypeScript's own `transpileModule`, as `tsc` would emit it.
 *
 * Why not tsx: tsx compiles with esbuild's `keepNames`, which wraps every named function
 * expression in `__name(fn, "name")` (an `Object.defineProperty` per closure created). That
 * adds about 1.8 KB per held lock and CPU on every acquire, none of which the published
 * packages (compiled by tsc) have, so the bench's figures would not be the users'.
 */
import { register } from "node:module";

register("./ts-hooks.mjs", import.meta.url);
