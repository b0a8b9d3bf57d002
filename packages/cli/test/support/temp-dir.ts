import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";

/**
 * A temporary directory, named `prefix` and a random tail, for the tests of the enclosing
 * block: made before they run, removed with everything in it after them. Returns a getter,
 * since the directory exists only once the block's tests start.
 */
export function useTempDir(prefix: string): () => string {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return () => dir;
}
