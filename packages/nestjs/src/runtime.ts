import "reflect-metadata";
import {
  ConfigError,
  type Coordinator,
  type Election,
  enablePrometheus,
  type PrometheusHandle,
} from "@baton/core";
import type {
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
  OnModuleInit,
} from "@nestjs/common";
import type { DiscoveryService, MetadataScanner } from "@nestjs/core";
import { LEADER_METADATA, type LeaderMetadata } from "./leader.js";
import { BATON_WRAPPED } from "./method-wrapper.js";
import type { BatonModuleOptions } from "./module-options.js";
import { describeError, nestLogger } from "./nest-logger.js";

/** The runtime of each instance that has a Baton-decorated method. */
const runtimes = new WeakMap<object, BatonRuntime>();
/** Every runtime between its module's init and its shutdown. */
const live = new Set<BatonRuntime>();

/**
 * The runtime a decorated method of `instance` runs with: its app's, or the only one in the
 * process for an instance the module did not see (one made per request, or by hand).
 */
export function runtimeFor(instance: unknown, decorator: string): BatonRuntime {
  const runtime = typeof instance === "object" && instance !== null && runtimes.get(instance);
  if (runtime) return runtime;
  if (live.size === 1) return [...live][0] as BatonRuntime;
  throw new ConfigError(
    decorator,
    live.size === 0
      ? "needs BatonModule.forRoot() or forRootAsync() imported in the application, and the application initialised"
      : "runs on an instance none of the applications in this process created; call it through the application",
  );
}

/**
 * What the module runs beside its coordinator: it finds the decorated methods, campaigns
 * for each `@Leader` once the application has started, steps down when it closes, then
 * closes the coordinator.
 *
 * @internal
 */
export class BatonRuntime
  implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown
{
  readonly coordinator: Coordinator;
  readonly options: BatonModuleOptions;
  readonly #discovery: DiscoveryService;
  readonly #scanner: MetadataScanner;
  readonly #prometheus: PrometheusHandle | undefined;
  readonly #leaders: { instance: object; method: string; metadata: LeaderMetadata }[] = [];
  readonly #elections: Election[] = [];
  readonly #closing = new AbortController();

  constructor(
    coordinator: Coordinator,
    options: BatonModuleOptions,
    discovery: DiscoveryService,
    scanner: MetadataScanner,
    prometheus: PrometheusHandle | undefined,
  ) {
    this.coordinator = coordinator;
    this.options = options;
    this.#discovery = discovery;
    this.#scanner = scanner;
    this.#prometheus = prometheus;
  }

  /** Makes the runtime: enables the metrics first, so that elections are watched. */
  static async create(
    coordinator: Coordinator,
    options: BatonModuleOptions,
    discovery: DiscoveryService,
    scanner: MetadataScanner,
  ): Promise<BatonRuntime> {
    const prometheus =
      options.prometheus === undefined
        ? undefined
        : await enablePrometheus(coordinator, options.prometheus);
    return new BatonRuntime(coordinator, options, discovery, scanner, prometheus);
  }

  /** Aborted when the application closes: runs in flight stop, leaders step down. */
  get closing(): AbortSignal {
    return this.#closing.signal;
  }

  onModuleInit(): void {
    live.add(this);
    const wrappers = [...this.#discovery.getProviders(), ...this.#discovery.getControllers()];
    for (const wrapper of wrappers) {
      const instance: unknown = wrapper.instance;
      if (typeof instance !== "object" || instance === null) continue;
      const prototype: unknown = Object.getPrototypeOf(instance);
      if (typeof prototype !== "object" || prototype === null) continue;
      const provider = Reflect.getMetadata(LEADER_METADATA, instance.constructor) as
        | LeaderMetadata
        | undefined;
      if (provider !== undefined && wrapper.isDependencyTreeStatic()) {
        this.#leaders.push({ instance, method: "lead", metadata: provider });
      }
      for (const method of this.#scanner.getAllMethodNames(prototype)) {
        const fn = (instance as Record<string, unknown>)[method];
        if (typeof fn !== "function") continue;
        if (Reflect.getMetadata(BATON_WRAPPED, fn) === true) runtimes.set(instance, this);
        const metadata = Reflect.getMetadata(LEADER_METADATA, fn) as LeaderMetadata | undefined;
        if (metadata !== undefined && wrapper.isDependencyTreeStatic()) {
          this.#leaders.push({ instance, method, metadata });
        }
      }
    }
  }

  onApplicationBootstrap(): void {
    for (const { instance, method, metadata } of this.#leaders) {
      const where = `@Leader("${metadata.name}") ${instance.constructor.name}.${method}`;
      const fn = (instance as Record<string, (...args: unknown[]) => unknown>)[method];
      this.#elections.push(
        this.coordinator.elect(metadata.name, {
          ...(metadata.options.value === undefined ? {} : { value: metadata.options.value }),
          onElected: async (term) => {
            nestLogger.log(`${where}: elected, term ${term.term}`);
            await fn?.call(instance, term);
          },
          onRevoked: ({ term, reason }) => {
            nestLogger.log(`${where}: term ${term} ended (${reason})`);
          },
          onError: (error) => nestLogger.error(`${where} failed`, describeError(error)),
        }),
      );
    }
  }

  /** Steps down first, before the other modules close what a leader's work may use. */
  async onModuleDestroy(): Promise<void> {
    this.#closing.abort(new Error("the application is closing"));
    await Promise.allSettled(this.#elections.splice(0).map((e) => e.close()));
  }

  async onApplicationShutdown(): Promise<void> {
    live.delete(this);
    this.#prometheus?.stop();
    await this.coordinator.close();
  }
}
