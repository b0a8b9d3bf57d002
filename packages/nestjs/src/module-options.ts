import type { CoordinatorOptions, PrometheusOptions } from "@baton/core";
import type { InjectionToken, ModuleMetadata, OptionalFactoryDependency } from "@nestjs/common";

/**
 * Options of {@link BatonModule.forRoot}: the coordinator's (exactly one of `url` and
 * `backend`, `ttlMs`, `mode`, `fence`, ...), and what the module adds.
 */
export interface BatonModuleOptions extends CoordinatorOptions {
  /**
   * Exposes the coordinator's metrics through prom-client (an optional peer of `@baton/core`)
   * as `enablePrometheus` does: pass `{}` for prom-client's global registry, or
   * `{ registry }` for your own. Off when absent.
   */
  readonly prometheus?: PrometheusOptions;
}

/** Options of {@link BatonModule.forRootAsync}: the module's options made by a factory. */
export interface BatonModuleAsyncOptions {
  /** Modules whose providers the factory needs, e.g. `[ConfigModule]`. */
  readonly imports?: ModuleMetadata["imports"];
  /** The factory's arguments, by token, e.g. `[ConfigService]`. */
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Makes the options (it may be async). */
  readonly useFactory: (
    // biome-ignore lint/suspicious/noExplicitAny: Nest's factories take whatever `inject` names.
    ...args: any[]
  ) => BatonModuleOptions | Promise<BatonModuleOptions>;
}
