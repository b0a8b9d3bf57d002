/**
 * `BATON_BENCH_OTEL=1`: every coordinator of the bench records OpenTelemetry spans and metrics
 * (`enableOpenTelemetry`), with the SDK as an application would set it up, except that
 * nothing leaves the process: spans go through a `BatchSpanProcessor` to an exporter that
 * drops them, and metrics to a periodic reader whose exporter drops them. The figures of a run
 * with and one without it are what recording costs on each path.
 */
import { createRequire } from "node:module";
import {
  type Coordinator,
  type CoordinatorOptions,
  createCoordinator,
  enableOpenTelemetry,
  type TelemetryMeterProvider,
  type TelemetryTracerProvider,
} from "@baton/core";

/** Whether this run records OpenTelemetry. */
export const TELEMETRY = process.env.BATON_BENCH_OTEL === "1";

interface Providers {
  readonly tracerProvider: TelemetryTracerProvider;
  readonly meterProvider: TelemetryMeterProvider;
}

let providers: Providers | undefined;

/** The process's providers, made on first use (the SDKs of core's tests). */
function sdkProviders(): Providers {
  if (providers !== undefined) return providers;
  const load = createRequire(new URL("../../packages/core/package.json", import.meta.url));
  const traceSdk = load(
    "@opentelemetry/sdk-trace-base",
  ) as typeof import("@opentelemetry/sdk-trace-base");
  const metricsSdk = load(
    "@opentelemetry/sdk-metrics",
  ) as typeof import("@opentelemetry/sdk-metrics");
  const success = { code: 0 };
  const dropSpans = {
    export: (_spans: unknown, done: (result: typeof success) => void) => done(success),
    shutdown: async () => {},
  };
  const dropMetrics = {
    export: (_metrics: unknown, done: (result: typeof success) => void) => done(success),
    forceFlush: async () => {},
    shutdown: async () => {},
  };
  providers = {
    tracerProvider: new traceSdk.BasicTracerProvider({
      spanProcessors: [new traceSdk.BatchSpanProcessor(dropSpans)],
    }),
    meterProvider: new metricsSdk.MeterProvider({
      readers: [
        new metricsSdk.PeriodicExportingMetricReader({
          exporter: dropMetrics,
          exportIntervalMillis: 10_000,
        }),
      ],
    }),
  };
  return providers;
}

/** `createCoordinator(options)`, recording OpenTelemetry when {@link TELEMETRY} is on. */
export function benchCoordinator(options: CoordinatorOptions): Coordinator {
  const coordinator = createCoordinator(options);
  if (TELEMETRY) {
    // With both providers given, enableOpenTelemetry subscribes before it returns.
    void enableOpenTelemetry(coordinator, sdkProviders());
  }
  return coordinator;
}
