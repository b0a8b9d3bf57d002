/**
 * `@baton/nestjs`: Baton in a NestJS application. `BatonModule.forRoot()` provides a
 * coordinator; `@WithLock` runs a method under a lock, `@RunOnce` makes a `@Cron()` method run
 * once per tick across replicas, `@Leader` runs a method only on the elected instance.
 *
 * @packageDocumentation
 * @module @baton/nestjs
 */
export { BatonModule } from "./baton-module.js";
export { Leader, type LeaderOptions, type LeaderProvider } from "./leader.js";
export { currentLock, currentRun } from "./lock-context.js";
export type { BatonModuleAsyncOptions, BatonModuleOptions } from "./module-options.js";
export { RunOnce, type RunOnceDecoratorOptions } from "./run-once.js";
export { BATON_COORDINATOR, BATON_MODULE_OPTIONS, InjectCoordinator } from "./tokens.js";
export { WithLock, type WithLockOptions } from "./with-lock.js";

/** Version of the `@baton/nestjs` package. */
export const BATON_NESTJS_VERSION = "0.1.0";
