/**
 * node-cron 4's `RunCoordinator`, declared by its shape so that this package's declarations
 * never import node-cron's: node-cron asks `shouldRun(key, ttlMs)` at every fire of a task
 * scheduled with `distributed: true`, runs the task on `true`, then calls `onComplete(key)`,
 * whether the task succeeded or threw. A rejected `shouldRun` skips the fire (node-cron logs
 * it as a coordinator error).
 */
export interface RunCoordinatorLike {
  /**
   * Whether this process runs the fire `key`: `<task name>:<the fire's instant, ISO 8601>`.
   * `ttlMs` is the task's `distributedLease` (node-cron's default 30 s).
   */
  shouldRun(key: string, ttlMs: number): Promise<boolean>;
  /** The fire `key` this process was told to run has ended, by success or failure. */
  onComplete(key: string): Promise<void>;
}

/**
 * The part of node-cron's `TaskContext` (what a task function is given) that Baton reads: the
 * fire's instant and the task, whose name is the job.
 */
export interface CronTaskContext {
  /** The instant of the fire (node-cron's scheduled time, not when the task started). */
  readonly date: Date;
  /** The task; node-cron sets it for every task function it calls. */
  readonly task?: { readonly name?: string | undefined } | undefined;
}
