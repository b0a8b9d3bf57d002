import { AsyncLocalStorage } from "node:async_hooks";
import { type Context, type ContextManager, context, ROOT_CONTEXT } from "@opentelemetry/api";
import {
  type DataPoint,
  type Histogram,
  MeterProvider,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

/**
 * The active context across awaits, as the Node SDK's `AsyncLocalStorageContextManager`
 * keeps it, so that a span started inside `context.with(...)` parents what follows.
 */
class AsyncContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(ctx, () => fn.call(thisArg, ...args));
  }

  bind<T>(_ctx: Context, target: T): T {
    return target;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }
}

let contextManagerSet = false;

/** Registers the async context manager once per test process. */
export function useAsyncContext(): void {
  if (contextManagerSet) return;
  contextManagerSet = context.setGlobalContextManager(new AsyncContextManager());
}

/** A metric reader that collects when asked. */
class CollectingReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** One data point of a collected metric. */
export interface Point {
  readonly attributes: Record<string, unknown>;
  readonly value: number | Histogram;
}

/** A tracer provider and a meter provider that keep what they record in memory. */
export class TelemetryRecorder {
  readonly exporter = new InMemorySpanExporter();
  readonly tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.exporter)],
  });
  readonly #reader = new CollectingReader();
  readonly meterProvider = new MeterProvider({ readers: [this.#reader] });

  /** The ended spans named `name`, oldest first. */
  spans(name?: string): ReadableSpan[] {
    return this.exporter.getFinishedSpans().filter((s) => name === undefined || s.name === name);
  }

  /** The data points of metric `name` at this moment. */
  async points(name: string): Promise<Point[]> {
    const { resourceMetrics } = await this.#reader.collect();
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== name) continue;
        return (metric.dataPoints as DataPoint<number | Histogram>[]).map((p) => ({
          attributes: { ...p.attributes },
          value: p.value,
        }));
      }
    }
    return [];
  }

  /** The unit metric `name` was created with. */
  async unit(name: string): Promise<string | undefined> {
    const { resourceMetrics } = await this.#reader.collect();
    for (const scope of resourceMetrics.scopeMetrics) {
      const metric = scope.metrics.find((m) => m.descriptor.name === name);
      if (metric !== undefined) return metric.descriptor.unit;
    }
    return undefined;
  }

  async shutdown(): Promise<void> {
    await Promise.all([this.tracerProvider.shutdown(), this.meterProvider.shutdown()]);
  }
}

/** The histogram value of a point (fails the test on a number). */
export function histogram(point: Point | undefined): Histogram {
  const value = point?.value;
  if (value === undefined || typeof value === "number") throw new Error("not a histogram point");
  return value;
}

/** Milliseconds of an OpenTelemetry `HrTime`. */
export function hrMs([seconds, nanos]: readonly [number, number]): number {
  return seconds * 1_000 + nanos / 1e6;
}
