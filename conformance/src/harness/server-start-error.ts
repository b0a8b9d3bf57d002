/**
 * A server group failed to start or to become ready. The message includes
 * the tail of every relevant log; `logFiles` lists them in full.
 */
export class ServerStartError extends Error {
  /** Log files of the processes involved. */
  readonly logFiles: readonly string[];

  constructor(message: string, logFiles: readonly string[], options?: ErrorOptions) {
    super(message, options);
    this.name = "ServerStartError";
    this.logFiles = logFiles;
  }
}

/** True when a start failed because a port was taken between lookup and bind. */
export function isAddressInUse(error: unknown): boolean {
  return error instanceof Error && /address already in use|EADDRINUSE/i.test(error.message);
}
