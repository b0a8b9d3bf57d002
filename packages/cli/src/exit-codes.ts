/**
 * Exit codes of `baton`. When CMD ran, baton exits with CMD's own code (128 + N when a
 * signal N ended it); these codes are for what happened before or instead.
 */
export const EXIT = {
  /**
   * Bad usage: unknown command or option, missing NAME or CMD, a bad backend URL or one whose
   * adapter is not installed (the message gives the command that installs it); for `lock`,
   * also a `--permits` other than the one the store holds for NAME, or a semaphore or
   * read-write lock on a backend without them.
   */
  usage: 64,
  /** The store could not be reached. */
  unavailable: 69,
  /** `--no-wait` and the lock is held by someone else (or not enough permits are free). */
  held: 75,
  /** The lock (or permit) was lost while CMD ran; CMD was stopped. */
  lost: 76,
  /** `run-once`: the slot is done (by this or another replica); CMD did not run. */
  alreadyDone: 80,
  /** `run-once`: another replica is running the slot now; CMD did not run. */
  runningElsewhere: 81,
  /** `run-once`: the slot has failed `--max-attempts` times; CMD did not run. */
  attemptsExhausted: 82,
  /** `run-once`: CMD ran past `--at-most`; it was stopped and the attempt recorded as failed. */
  overran: 83,
  /** `release`: nothing to release (the name is free, or the `--token` grant has ended). */
  nothingToRelease: 84,
  /** `release`: the backend cannot force-release (its guarantees declare no `forceRelease`). */
  cannotForceRelease: 85,
  /** `--wait` ran out while someone else held the lock (or the permits). */
  timeout: 124,
  /** CMD could not be started (not found, not executable). */
  cannotRun: 127,
} as const;
