/**
 * How lock and election names become metric label (Prometheus) or attribute (OpenTelemetry)
 * values: one series per name a service uses, never one per runOnce slot or partition, and
 * never more than a bound.
 */

/** Default bound on distinct name values per metric set (`maxNames`). */
export const DEFAULT_MAX_METRIC_NAMES = 100;

/** The value names beyond the `maxNames` bound are counted under. */
export const OTHER_METRIC_NAME = "other";

const PARTITION = /^(.+)\/partition\/\d+$/;

/**
 * The default metric name of a lock or election name: a slot's lock `<job>/slot/<slot>` is
 * `<job>/slot/*`, a partition `<name>/partition/<n>` is `<name>/partition/*`.
 */
export function defaultMetricName(name: string): string {
  const slot = name.indexOf("/slot/");
  if (slot > 0) return `${name.slice(0, slot)}/slot/*`;
  const partition = PARTITION.exec(name);
  return partition === null ? name : `${partition[1]}/partition/*`;
}

/** The name values in use: the first `max` given, then {@link OTHER_METRIC_NAME}. */
export class BoundedNames {
  readonly #admitted = new Set<string>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  admit(value: string): string {
    if (this.#admitted.has(value)) return value;
    if (this.#admitted.size >= this.#max) return OTHER_METRIC_NAME;
    this.#admitted.add(value);
    return value;
  }
}
