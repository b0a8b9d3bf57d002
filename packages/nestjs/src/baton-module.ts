import { type Coordinator, createCoordinator } from "@baton/core";
import type { DynamicModule, Provider } from "@nestjs/common";
import { DiscoveryModule, DiscoveryService, MetadataScanner } from "@nestjs/core";
import type { BatonModuleAsyncOptions, BatonModuleOptions } from "./module-options.js";
import { batonLoggerFor, nestLogger } from "./nest-logger.js";
import { BatonRuntime } from "./runtime.js";
import { BATON_COORDINATOR, BATON_MODULE_OPTIONS } from "./tokens.js";

/**
 * Baton in a Nest application: a global `Coordinator` (injected with
 * {@link InjectCoordinator} or `@Inject(BATON_COORDINATOR)`), and what the decorators
 * ({@link WithLock}, {@link RunOnce}, {@link Leader}) need. When the application closes
 * (`app.close()`, or SIGTERM with `app.enableShutdownHooks()`), leaders step down first, then,
 * once the HTTP server stopped, the coordinator releases its locks and closes its backend.
 * Background failures (renewals, elections, runs) go to Nest's logger, context `Baton`.
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [ScheduleModule.forRoot(), BatonModule.forRoot({ url: "redis://localhost:6379" })],
 * })
 * class AppModule {}
 * ```
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class with forRoot().
export class BatonModule {
  /** The module with `options`: the coordinator's options and `prometheus`. */
  static forRoot(options: BatonModuleOptions): DynamicModule {
    return moduleWith([{ provide: BATON_MODULE_OPTIONS, useValue: options }], []);
  }

  /**
   * The module with options made by a factory, e.g. from `ConfigService`:
   * `forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (config) =>
   * ({ url: config.getOrThrow("BATON_URL") }) })`.
   */
  static forRootAsync(options: BatonModuleAsyncOptions): DynamicModule {
    return moduleWith(
      [
        {
          provide: BATON_MODULE_OPTIONS,
          useFactory: options.useFactory,
          inject: options.inject ?? [],
        },
      ],
      options.imports ?? [],
    );
  }
}

function moduleWith(
  optionsProviders: Provider[],
  imports: NonNullable<DynamicModule["imports"]>,
): DynamicModule {
  return {
    module: BatonModule,
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers: [
      ...optionsProviders,
      {
        provide: BATON_COORDINATOR,
        useFactory: (options: BatonModuleOptions): Coordinator => {
          const { prometheus: _prometheus, ...coordinatorOptions } = options;
          return createCoordinator({ logger: batonLoggerFor(nestLogger), ...coordinatorOptions });
        },
        inject: [BATON_MODULE_OPTIONS],
      },
      {
        provide: BatonRuntime,
        useFactory: BatonRuntime.create,
        inject: [BATON_COORDINATOR, BATON_MODULE_OPTIONS, DiscoveryService, MetadataScanner],
      },
    ],
    exports: [BATON_COORDINATOR, BATON_MODULE_OPTIONS],
  };
}
