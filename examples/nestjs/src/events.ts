/**
 * What the example does, one JSON line per event on stdout (beside Nest's own log lines), so
 * that you can follow each replica, and the example's test can check them.
 */
export function record(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(
    `${JSON.stringify({ event, pid: process.pid, at: Date.now(), ...fields })}\n`,
  );
}
