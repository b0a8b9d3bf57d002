import { execFile } from "node:child_process";
import { join } from "node:path";

/**
 * Runs `pg_isready` against a PostgreSQL server on TCP.
 *
 * @param binDir - the directory holding `pg_isready`
 * @param host - server address
 * @param port - server port
 * @returns true when the server accepts connections (exit status 0)
 */
export function pgIsReady(binDir: string, host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(
      join(binDir, "pg_isready"),
      ["-h", host, "-p", String(port), "-U", "postgres", "-d", "postgres", "-t", "2"],
      { timeout: 5000 },
      (error) => resolve(error === null),
    );
  });
}
