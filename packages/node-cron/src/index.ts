/**
 * `@baton/node-cron`: a run coordinator for node-cron 4. Each fire of a task scheduled with
 * `distributed: true` runs once across replicas, through `runOnce` records in the store of a
 * Baton coordinator: a crashed fire is taken over, and the task gets the fire's fencing token
 * and signal.
 *
 * @packageDocumentation
 * @module @baton/node-cron
 */
export type { CronTaskContext, RunCoordinatorLike } from "./node-cron-shapes.js";
export {
  type BatonRunCoordinator,
  type BatonRunCoordinatorOptions,
  batonRunCoordinator,
  type CronFire,
  DEFAULT_AT_MOST_MS,
} from "./run-coordinator.js";

/** Version of the `@baton/node-cron` package. */
export const BATON_NODE_CRON_VERSION = "0.1.0";
