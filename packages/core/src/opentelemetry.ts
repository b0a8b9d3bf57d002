import { ConfigError, isAbortError, type LockLostReason } from "./contract/errors.js";
import type { Coordinator } from "./coordinator.js";
import { checkFunction } from "./helpers/validate.js";
import type { Lock } from "./kernel/lock.js";
import {
  BoundedNames,
  DEFAULT_MAX_METRIC_NAMES,
  defaultMetricName,
} from "./observability/metric-names.js";

// The shapes below are the few methods of OpenTelemetry's API that Baton calls, so that these
// declarations compile without @opentelemetry/api installed, and an application that passes
// its own providers never makes TypeScript read that package's declarations through Baton.

/** Attribute values as Baton sets them on spans, span events and measurements. */
export type TelemetryAttributes = Readonly<Record<string, string | number | boolean>>;

/** A span's identity: OpenTelemetry's `SpanContext` has this shape. */
export interface TelemetrySpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}

/** A span as Baton uses it: OpenTelemetry's `Span` (`@opentelemetry/api`) has this shape. */
export interface TelemetrySpan {
  /** Sets attributes on the span. */
  setAttributes(attributes: TelemetryAttributes): unknown;
  /** Adds an event at `time` (milliseconds since the Unix epoch). */
  addEvent(name: string, attributes?: TelemetryAttributes, time?: number): unknown;
  /** Sets the status: `code` 2 is `SpanStatusCode.ERROR`. */
  setStatus(status: { code: number; message?: string }): unknown;
  /** Records an error as an `exception` event. */
  recordException(exception: Error, time?: number): void;
  /** The span's identity, passed back as a link's `context`. */
  spanContext(): TelemetrySpanContext;
  /** Ends the span at `endTime` (milliseconds since the Unix epoch). */
  end(endTime?: number): void;
}

/** Options of {@link TelemetryTracer.startSpan} that Baton passes. */
export interface TelemetrySpanOptions {
  /** Milliseconds since the Unix epoch. */
  readonly startTime?: number;
  readonly attributes?: TelemetryAttributes;
  /** Links to other spans, by the `spanContext()` they returned. */
  readonly links?: { context: TelemetrySpanContext }[];
}

/** A tracer as Baton uses it: OpenTelemetry's `Tracer` has this shape. */
export interface TelemetryTracer {
  /** Starts a span, a child of the active span when there is one. */
  startSpan(name: string, options?: TelemetrySpanOptions): TelemetrySpan;
}

/** A tracer provider as Baton uses it: OpenTelemetry's `TracerProvider` has this shape. */
export interface TelemetryTracerProvider {
  /** The tracer of an instrumentation scope. */
  getTracer(name: string, version?: string): TelemetryTracer;
}

/** Options of the instruments Baton creates. */
export interface TelemetryInstrumentOptions {
  readonly description?: string;
  readonly unit?: string;
  /** Histogram bucket boundaries, in the instrument's unit. */
  readonly advice?: { explicitBucketBoundaries?: number[] };
}

/** A histogram as Baton uses it. */
export interface TelemetryHistogram {
  /** Records one value. */
  record(value: number, attributes?: TelemetryAttributes): void;
}

/** A counter or up-down counter as Baton uses it. */
export interface TelemetryCounter {
  /** Adds `value` (negative only for an up-down counter). */
  add(value: number, attributes?: TelemetryAttributes): void;
}

/** What an observable gauge's callback reports to. */
export interface TelemetryObservation {
  /** Reports one value of the series `attributes` names. */
  observe(value: number, attributes?: TelemetryAttributes): void;
}

/** An observable gauge as Baton uses it. */
export interface TelemetryObservableGauge {
  /** Calls `callback` at each collection. */
  addCallback(callback: (observation: TelemetryObservation) => void): void;
  /** Stops calling `callback`. */
  removeCallback(callback: (observation: TelemetryObservation) => void): void;
}

/** A meter as Baton uses it: OpenTelemetry's `Meter` has this shape. */
export interface TelemetryMeter {
  /** Creates a histogram. */
  createHistogram(name: string, options?: TelemetryInstrumentOptions): TelemetryHistogram;
  /** Creates a counter. */
  createCounter(name: string, options?: TelemetryInstrumentOptions): TelemetryCounter;
  /** Creates an up-down counter. */
  createUpDownCounter(name: string, options?: TelemetryInstrumentOptions): TelemetryCounter;
  /** Creates an observable gauge. */
  createObservableGauge(
    name: string,
    options?: TelemetryInstrumentOptions,
  ): TelemetryObservableGauge;
}

/** A meter provider as Baton uses it: OpenTelemetry's `MeterProvider` has this shape. */
export interface TelemetryMeterProvider {
  /** The meter of an instrumentation scope. */
  getMeter(name: string, version?: string): TelemetryMeter;
}

/** Options of {@link enableOpenTelemetry}. */
export interface OpenTelemetryOptions {
  /**
   * Where the spans go (default: the global provider of `@opentelemetry/api`, the one an SDK
   * registers when it starts). `false`: no spans.
   */
  readonly tracerProvider?: TelemetryTracerProvider | false;
  /** Where the metrics go (default: the global provider of `@opentelemetry/api`). `false`: no metrics. */
  readonly meterProvider?: TelemetryMeterProvider | false;
  /**
   * The `baton.lock.name` (or `baton.election.name`) attribute of a metric measurement: return
   * the value to group the name under (e.g. `(n) => n.replace(/^invoice\/.*$/, "invoice/*")`),
   * or `undefined` to leave the attribute out (as the Prometheus `metricName` does). A runOnce
   * or schedule slot's lock (`<job>/slot/<slot>`) is counted as `<job>/slot/*` and a partition
   * (`<name>/partition/<n>`) as `<name>/partition/*` whatever it returns; without it, any
   * other name is counted as itself. Spans always carry the full name.
   */
  readonly metricName?: (name: string) => string | undefined;
  /**
   * At most this many distinct values of the name attributes of the metrics (and of
   * `baton.job.name`); later ones are counted under `"other"`. Default 100.
   */
  readonly maxNames?: number;
}

/** What {@link enableOpenTelemetry} returns. */
export interface OpenTelemetryHandle {
  /**
   * Stops recording: no new spans or measurements; spans still open (holds, terms) end now,
   * with the attribute `baton.telemetry.stopped`.
   */
  stop(): void;
}

/** The instrumentation scope name of Baton's tracer and meter. */
const SCOPE = "@baton/core";
/** `SpanStatusCode.ERROR` of `@opentelemetry/api`. */
const STATUS_ERROR = 2;
/** Ways a hold ends that are not failures: the holder or the coordinator let go. */
const CALM_ENDS: ReadonlySet<string> = new Set<LockLostReason | "resigned">([
  "released",
  "closed",
  "resigned",
]);
/** Acquire and wait buckets, seconds (those of the Prometheus histograms). */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60];
/** Hold buckets, seconds (those of `baton_lock_hold_seconds`). */
const HOLD_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3_600];
/** Slots whose start a `baton.job.run` span looks up, at most (the oldest are forgotten). */
const MAX_SLOT_STARTS = 1_000;

/** Milliseconds since the Unix epoch, to the microsecond. */
function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Records a coordinator's activity as OpenTelemetry spans and metrics, on the providers given
 * or on the global ones of `@opentelemetry/api` (an optional peer dependency, loaded only
 * here, and only when a provider is not given). Built on the coordinator's events: enable it
 * before the first `acquire()` or `elect()` whose activity should be recorded.
 *
 * Spans (attributes in the core README's OpenTelemetry table):
 * - `baton.acquire`: from the call to the grant, or to the error (status error, the
 *   exception, `baton.lock.outcome`); a child of the span active at the call.
 * - `baton.hold`: from the grant to the release or the loss, linked to its `baton.acquire`;
 *   a loss sets the status to error with `baton.lock.lost_reason` (and the operator's text
 *   in `baton.lock.lost_detail` for `revoked`); a failed renewal is a `baton.renew_failed`
 *   event on every hold it puts at risk, and `warnHeldMs` passed a `baton.held_too_long` one.
 * - `baton.election.term`: one term of this instance as leader, linked to the hold of its lock.
 * - `baton.job.run`: one `runOnce` call or scheduled slot, with its outcome.
 *
 * Metrics: `baton.lock.acquire.duration`, `baton.lock.wait.duration` (by
 * `baton.lock.outcome`) and `baton.lock.hold.duration` (histograms, seconds),
 * `baton.lock.held`, `baton.lock.waiters`,
 * `baton.lock.contentions`, `baton.lock.renewal_failures`, `baton.lock.revocations`,
 * `baton.election.leader`, `baton.election.terms`, `baton.job.runs` and
 * `baton.job.last_success`; their name attributes go through `metricName`.
 *
 * It resolves once the providers are ready; with both providers given, it subscribes before
 * it returns its promise. Rejects with `ConfigError` for a bad option, or when a provider is
 * not given and `@opentelemetry/api` is not installed.
 *
 * @example
 * // after the OpenTelemetry SDK has started (it registers the global providers)
 * const telemetry = await enableOpenTelemetry(coordinator, {
 *   metricName: (name) => (name.startsWith("invoice/") ? "invoice/*" : name),
 * });
 * // at shutdown
 * telemetry.stop();
 */
export async function enableOpenTelemetry(
  coordinator: Coordinator,
  options: OpenTelemetryOptions = {},
): Promise<OpenTelemetryHandle> {
  const metricName = options.metricName;
  if (metricName !== undefined) {
    checkFunction(metricName, "metricName", "must be a function (name) => string | undefined");
  }
  const maxNames = options.maxNames ?? DEFAULT_MAX_METRIC_NAMES;
  if (!Number.isInteger(maxNames) || maxNames < 1) {
    throw new ConfigError("maxNames", `must be a positive integer, got ${String(maxNames)}`);
  }
  checkProvider(options.tracerProvider, "tracerProvider", "getTracer");
  checkProvider(options.meterProvider, "meterProvider", "getMeter");
  let tracerProvider = options.tracerProvider;
  let meterProvider = options.meterProvider;
  if (tracerProvider === undefined || meterProvider === undefined) {
    const api = await loadApi();
    tracerProvider ??= api.trace.getTracerProvider();
    meterProvider ??= api.metrics.getMeterProvider();
  }
  const tracer = tracerProvider === false ? undefined : tracerProvider.getTracer(SCOPE);
  const meter = meterProvider === false ? undefined : meterProvider.getMeter(SCOPE);
  return record(coordinator, {
    tracer,
    meter: meter === undefined ? undefined : instruments(meter),
    names: metricNames(metricName, maxNames),
    jobs: new BoundedNames(maxNames),
  });
}

function checkProvider(value: unknown, field: string, method: string): void {
  if (value === undefined || value === false) return;
  const fn = (value as Record<string, unknown> | null)?.[method];
  if (typeof fn !== "function") {
    throw new ConfigError(field, `must be an OpenTelemetry provider (with ${method}) or false`);
  }
}

interface OpenTelemetryApi {
  trace: { getTracerProvider(): TelemetryTracerProvider };
  metrics: { getMeterProvider(): TelemetryMeterProvider };
}

async function loadApi(): Promise<OpenTelemetryApi> {
  try {
    return (await import("@opentelemetry/api")) as unknown as OpenTelemetryApi;
  } catch (cause) {
    throw new ConfigError(
      "@opentelemetry/api",
      "the global OpenTelemetry providers need the @opentelemetry/api package: npm install @opentelemetry/api (or pass tracerProvider and meterProvider)",
      { cause },
    );
  }
}

/** Baton's instruments on one meter. */
interface Instruments {
  readonly acquire: TelemetryHistogram;
  readonly wait: TelemetryHistogram;
  readonly hold: TelemetryHistogram;
  readonly waiters: TelemetryCounter;
  readonly contentions: TelemetryCounter;
  readonly renewalFailures: TelemetryCounter;
  readonly revocations: TelemetryCounter;
  readonly terms: TelemetryCounter;
  readonly jobRuns: TelemetryCounter;
  readonly gauges: readonly TelemetryObservableGauge[];
}

function instruments(meter: TelemetryMeter): Instruments {
  return {
    acquire: meter.createHistogram("baton.lock.acquire.duration", {
      description: "Time from acquire() to the grant, for every grant",
      unit: "s",
      advice: { explicitBucketBoundaries: WAIT_BUCKETS },
    }),
    wait: meter.createHistogram("baton.lock.wait.duration", {
      description: "Waits for a taken lock, from acquire() to their end, by outcome",
      unit: "s",
      advice: { explicitBucketBoundaries: WAIT_BUCKETS },
    }),
    hold: meter.createHistogram("baton.lock.hold.duration", {
      description: "Time from the grant to the release or the loss",
      unit: "s",
      advice: { explicitBucketBoundaries: HOLD_BUCKETS },
    }),
    waiters: meter.createUpDownCounter("baton.lock.waiters", {
      description: "Acquires of this instance waiting for a held lock",
      unit: "{acquire}",
    }),
    contentions: meter.createCounter("baton.lock.contentions", {
      description: "Acquires that found the lock taken at their first look",
      unit: "{acquire}",
    }),
    renewalFailures: meter.createCounter("baton.lock.renewal_failures", {
      description: "Failed session renewals, per lock that depended on them",
      unit: "{failure}",
    }),
    revocations: meter.createCounter("baton.lock.revocations", {
      description:
        "Locks released by force: this instance's revoked (holder), its forced releases (operator)",
      unit: "{revocation}",
    }),
    terms: meter.createCounter("baton.election.terms", {
      description: "Terms this instance started as leader",
      unit: "{term}",
    }),
    jobRuns: meter.createCounter("baton.job.runs", {
      description: "runOnce calls and scheduled slots on this instance, by outcome",
      unit: "{run}",
    }),
    gauges: [
      meter.createObservableGauge("baton.lock.held", {
        description: "Locks of the name this instance holds",
        unit: "{lock}",
      }),
      meter.createObservableGauge("baton.election.leader", {
        description: "Elections of the name this instance leads",
        unit: "{election}",
      }),
      meter.createObservableGauge("baton.job.last_success", {
        description: "When a run of the job last finished on this instance (Unix seconds)",
        unit: "s",
      }),
    ],
  };
}

/** The metric name attribute value of a lock or election name, or `undefined` to leave it out. */
type MetricNames = (name: string) => string | undefined;

function metricNames(
  metricName: ((name: string) => string | undefined) | undefined,
  maxNames: number,
): MetricNames {
  const values = new BoundedNames(maxNames);
  return (name) => {
    let mapped: string | undefined;
    if (metricName === undefined) {
      mapped = defaultMetricName(name);
    } else {
      try {
        const value = metricName(name);
        // Slots and partitions stay grouped whatever the mapping returns.
        mapped = typeof value === "string" ? defaultMetricName(value) : undefined;
      } catch {
        mapped = undefined;
      }
    }
    return mapped === undefined ? undefined : values.admit(mapped);
  };
}

/** A lock this instance holds, while it holds it. */
interface Hold {
  readonly name: string;
  readonly span: TelemetrySpan | undefined;
  readonly grantedAt: number;
  readonly metricName: string | undefined;
}

/** An election term this instance leads, while it leads it. */
interface Term {
  readonly span: TelemetrySpan | undefined;
  readonly metricName: string | undefined;
}

interface Recording {
  readonly tracer: TelemetryTracer | undefined;
  readonly meter: Instruments | undefined;
  readonly names: MetricNames;
  readonly jobs: BoundedNames;
}

/** Subscribes to the coordinator's events and turns them into spans and measurements. */
function record(coordinator: Coordinator, r: Recording): OpenTelemetryHandle {
  const { tracer, meter, names } = r;
  let backend = "unknown";
  coordinator.backend().then(
    (b) => {
      backend = b.kind;
    },
    () => undefined,
  );
  const holds = new Map<Lock, Hold>();
  /** Each slot lock's latest grant: when its acquire started, and its hold span. */
  const slotStarts = new Map<
    string,
    { startedAt: number; hold: TelemetrySpanContext | undefined }
  >();
  const terms = new Map<string, Term>();
  /** Waits under way that began while recording, by lock name. */
  const waiting = new Map<string, number>();
  const lastSuccess = new Map<string, number>();
  /** Attributes of a metric measurement about `name` (under `key`). */
  const named = (
    metric: string | undefined,
    key = "baton.lock.name",
    extra?: TelemetryAttributes,
  ): TelemetryAttributes =>
    metric === undefined ? (extra ?? {}) : { [key]: metric, ...(extra ?? {}) };

  // The attributes of the measurements every acquire and release makes, made once per name.
  const acquiredByMetric = new Map<string | undefined, TelemetryAttributes>();
  const acquiredAttributes = (metric: string | undefined): TelemetryAttributes => {
    let attributes = acquiredByMetric.get(metric);
    if (attributes === undefined) {
      attributes = named(metric);
      acquiredByMetric.set(metric, attributes);
    }
    return attributes;
  };
  const endsByMetric = new Map<string | undefined, Record<string, TelemetryAttributes>>();
  const endAttributes = (metric: string | undefined, end: string): TelemetryAttributes => {
    let ends = endsByMetric.get(metric);
    if (ends === undefined) {
      ends = {};
      endsByMetric.set(metric, ends);
    }
    let attributes = ends[end];
    if (attributes === undefined) {
      attributes = named(metric, "baton.lock.name", { "baton.lock.end": end });
      ends[end] = attributes;
    }
    return attributes;
  };
  const endHold = (lock: Lock, end: "released" | "lost", at: number): Hold | undefined => {
    const hold = holds.get(lock);
    if (hold === undefined) return undefined;
    holds.delete(lock);
    const heldMs = at - hold.grantedAt;
    meter?.hold.record(heldMs / 1_000, endAttributes(hold.metricName, end));
    hold.span?.setAttributes({ "baton.lock.held_ms": heldMs, "baton.lock.end": end });
    return hold;
  };

  // A gauge reports 0 for a name no longer held or led (the SDK would repeat its last value).
  const heldMetrics = new Set<string | undefined>();
  const ledMetrics = new Set<string | undefined>();
  const observeHeld = (observation: TelemetryObservation) => {
    const byMetric = new Map<string | undefined, Set<string>>();
    for (const metric of heldMetrics) byMetric.set(metric, new Set());
    for (const hold of holds.values()) {
      let heldNames = byMetric.get(hold.metricName);
      if (heldNames === undefined) {
        heldNames = new Set();
        byMetric.set(hold.metricName, heldNames);
      }
      heldNames.add(hold.name);
    }
    for (const [metric, heldNames] of byMetric) {
      observation.observe(heldNames.size, named(metric));
    }
  };
  const observeLeading = (observation: TelemetryObservation) => {
    const byMetric = new Map<string | undefined, number>();
    for (const metric of ledMetrics) byMetric.set(metric, 0);
    for (const term of terms.values()) {
      byMetric.set(term.metricName, (byMetric.get(term.metricName) ?? 0) + 1);
    }
    for (const [metric, count] of byMetric) {
      observation.observe(count, named(metric, "baton.election.name"));
    }
  };
  const observeJobs = (observation: TelemetryObservation) => {
    for (const [job, at] of lastSuccess) observation.observe(at, { "baton.job.name": job });
  };
  const callbacks = [observeHeld, observeLeading, observeJobs];
  if (meter !== undefined) {
    meter.gauges.forEach((gauge, i) => {
      const callback = callbacks[i];
      if (callback !== undefined) gauge.addCallback(callback);
    });
  }

  const unsubscribe = [
    coordinator.on("acquired", ({ name, token, waitedMs, attempts, lock }) => {
      const now = nowMs();
      const metricName = names(name);
      meter?.acquire.record(waitedMs / 1_000, acquiredAttributes(metricName));
      let span: TelemetrySpan | undefined;
      let linked: TelemetrySpanContext | undefined;
      if (tracer !== undefined) {
        const tokenText = token.toString();
        const acquire = tracer.startSpan("baton.acquire", {
          startTime: now - waitedMs,
          attributes: {
            "baton.lock.name": name,
            "baton.lock.token": tokenText,
            "baton.backend": backend,
            "baton.lock.waited_ms": waitedMs,
            "baton.lock.attempts": attempts,
          },
        });
        acquire.end(now);
        span = tracer.startSpan("baton.hold", {
          startTime: now,
          attributes: {
            "baton.lock.name": name,
            "baton.lock.token": tokenText,
            "baton.backend": backend,
            "baton.owner_id": coordinator.ownerId,
          },
          links: [{ context: acquire.spanContext() }],
        });
        linked = span.spanContext();
      }
      holds.set(lock, { name, span, grantedAt: now, metricName });
      heldMetrics.add(metricName);
      if (name.includes("/slot/")) {
        slotStarts.delete(name);
        slotStarts.set(name, { startedAt: now - waitedMs, hold: linked });
        if (slotStarts.size > MAX_SLOT_STARTS) {
          const oldest = slotStarts.keys().next().value;
          if (oldest !== undefined) slotStarts.delete(oldest);
        }
      }
    }),
    coordinator.on("acquireFailed", ({ name, error, waitedMs, attempts }) => {
      const now = nowMs();
      if (tracer === undefined) return;
      const outcome = failedOutcome(error);
      const span = tracer.startSpan("baton.acquire", {
        startTime: now - waitedMs,
        attributes: {
          "baton.lock.name": name,
          "baton.backend": backend,
          "baton.lock.waited_ms": waitedMs,
          "baton.lock.attempts": attempts,
          "baton.lock.outcome": outcome,
          ...errorCode(error),
        },
      });
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof Error) span.recordException(error, now);
      span.setStatus({ code: STATUS_ERROR, message });
      span.end(now);
    }),
    coordinator.on("contended", ({ name }) => {
      meter?.contentions.add(1, named(names(name)));
    }),
    coordinator.on("waitStarted", ({ name }) => {
      waiting.set(name, (waiting.get(name) ?? 0) + 1);
      meter?.waiters.add(1, named(names(name)));
    }),
    coordinator.on("waitEnded", ({ name, waitedMs, outcome }) => {
      const metricName = names(name);
      // A wait that began before recording did is not taken off the count.
      const count = waiting.get(name) ?? 0;
      if (count > 0) {
        if (count === 1) waiting.delete(name);
        else waiting.set(name, count - 1);
        meter?.waiters.add(-1, named(metricName));
      }
      meter?.wait.record(
        waitedMs / 1_000,
        named(metricName, "baton.lock.name", { "baton.lock.outcome": outcome }),
      );
    }),
    // The operator's side of a forced release (the coordinator's forceRelease emits it).
    coordinator.on("forceReleased", ({ name, released }) => {
      if (released) {
        meter?.revocations.add(
          1,
          named(names(name), "baton.lock.name", { "baton.revocation.side": "operator" }),
        );
      }
    }),
    coordinator.on("heldTooLong", ({ heldMs, thresholdMs, lock }) => {
      holds.get(lock)?.span?.addEvent("baton.held_too_long", {
        "baton.lock.held_ms": heldMs,
        "baton.lock.threshold_ms": thresholdMs,
      });
    }),
    coordinator.on("released", ({ lock }) => {
      const now = nowMs();
      endHold(lock, "released", now)?.span?.end(now);
    }),
    coordinator.on("lost", ({ name, reason, error, lock }) => {
      const now = nowMs();
      const hold = endHold(lock, "lost", now);
      if (reason === "revoked") {
        meter?.revocations.add(
          1,
          named(hold?.metricName ?? names(name), "baton.lock.name", {
            "baton.revocation.side": "holder",
          }),
        );
      }
      const span = hold?.span;
      if (span === undefined) return;
      span.setAttributes({
        "baton.lock.lost_reason": reason,
        ...(error.detail === undefined ? {} : { "baton.lock.lost_detail": error.detail }),
      });
      if (!CALM_ENDS.has(reason)) {
        span.recordException(error, now);
        span.setStatus({ code: STATUS_ERROR, message: error.message });
      }
      span.end(now);
    }),
    coordinator.on("renewFailed", ({ error, remainingMs, names: failed }) => {
      const now = nowMs();
      const atRisk = new Set(failed);
      for (const name of atRisk) meter?.renewalFailures.add(1, named(names(name)));
      if (tracer === undefined) return;
      const attributes = {
        "baton.session.remaining_ms": remainingMs,
        "exception.message": error instanceof Error ? error.message : String(error),
        ...errorCode(error),
      };
      for (const hold of holds.values()) {
        if (atRisk.has(hold.name)) hold.span?.addEvent("baton.renew_failed", attributes, now);
      }
    }),
    coordinator.on("elected", ({ name, term }) => {
      const now = nowMs();
      const metricName = names(name);
      meter?.terms.add(1, named(metricName, "baton.election.name"));
      let span: TelemetrySpan | undefined;
      if (tracer !== undefined) {
        const links: { context: TelemetrySpanContext }[] = [];
        for (const hold of holds.values()) {
          const context = hold.span?.spanContext();
          if (hold.name === name && context !== undefined) links.push({ context });
        }
        span = tracer.startSpan("baton.election.term", {
          startTime: now,
          attributes: {
            "baton.election.name": name,
            "baton.election.term": term.toString(),
            "baton.backend": backend,
            "baton.owner_id": coordinator.ownerId,
          },
          links,
        });
      }
      terms.get(name)?.span?.end(now);
      terms.set(name, { span, metricName });
      ledMetrics.add(metricName);
    }),
    // A campaigning instance reports 0 until it leads: an election nobody leads shows as 0.
    coordinator.on("campaignStarted", ({ name }) => {
      ledMetrics.add(names(name));
    }),
    coordinator.on("revoked", ({ name, term, reason }) => {
      const ended = terms.get(name);
      if (ended === undefined) return;
      terms.delete(name);
      const span = ended.span;
      if (span === undefined) return;
      span.setAttributes({ "baton.election.end_reason": reason });
      if (!CALM_ENDS.has(reason)) {
        span.setStatus({ code: STATUS_ERROR, message: `term ${term} ended: ${reason}` });
      }
      span.end(nowMs());
    }),
    coordinator.on("jobRun", ({ job, slot, outcome, attempt }) => {
      const now = nowMs();
      const jobName = r.jobs.admit(job);
      meter?.jobRuns.add(1, { "baton.job.name": jobName, "baton.job.outcome": outcome });
      if (outcome === "ran") lastSuccess.set(jobName, Date.now() / 1_000);
      const key = `${job}/slot/${slot}`;
      const started = slotStarts.get(key);
      slotStarts.delete(key);
      if (tracer === undefined) return;
      const ranHere = outcome === "ran" || outcome === "failed";
      const span = tracer.startSpan("baton.job.run", {
        startTime: ranHere && started !== undefined ? started.startedAt : now,
        attributes: {
          "baton.job.name": job,
          "baton.job.slot": slot,
          "baton.job.outcome": outcome,
          ...(attempt === undefined ? {} : { "baton.job.attempt": attempt }),
          "baton.backend": backend,
        },
        links: ranHere && started?.hold !== undefined ? [{ context: started.hold }] : [],
      });
      if (outcome === "failed") span.setStatus({ code: STATUS_ERROR, message: "the run failed" });
      span.end(now);
    }),
  ];

  return {
    stop() {
      for (const off of unsubscribe) off();
      if (meter !== undefined) {
        meter.gauges.forEach((gauge, i) => {
          const callback = callbacks[i];
          if (callback !== undefined) gauge.removeCallback(callback);
        });
      }
      const now = nowMs();
      for (const open of [...holds.values(), ...terms.values()]) {
        open.span?.setAttributes({ "baton.telemetry.stopped": true });
        open.span?.end(now);
      }
      holds.clear();
      terms.clear();
      slotStarts.clear();
    },
  };
}

/** The `baton.lock.outcome` of an acquire that rejected with `error`. */
function failedOutcome(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === "BATON_LOCK_TIMEOUT") return "timeout";
  if (code === "BATON_LOCK_HELD") return "held";
  if (code === "BATON_CLOSED" || isAbortError(error)) return "aborted";
  return "error";
}

/** `baton.error.code` of a Baton error (its stable `code`), none for another error. */
function errorCode(error: unknown): TelemetryAttributes {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? { "baton.error.code": code } : {};
}
