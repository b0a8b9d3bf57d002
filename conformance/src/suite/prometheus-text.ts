/** One sample of the Prometheus text exposition format: `name{labels} value`. */
export interface PrometheusSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/**
 * Parses the Prometheus text exposition format (what prom-client's `registry.metrics()`
 * returns) into samples. Comment lines (`# HELP`, `# TYPE`) and blank lines are skipped; a
 * trailing timestamp is ignored. Throws on a line it cannot read, so a malformed scrape fails
 * the test instead of counting as zero.
 */
export function parsePrometheusText(text: string): PrometheusSample[] {
  const samples: PrometheusSample[] = [];
  for (const [index, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const nameEnd = line.search(/[{\s]/);
    if (nameEnd <= 0) throw new Error(`prometheus text line ${index + 1}: no value in "${line}"`);
    const name = line.slice(0, nameEnd);
    let at = nameEnd;
    const labels: Record<string, string> = {};
    if (line[at] === "{") {
      at = readLabels(line, at + 1, labels, index + 1);
    }
    const rest = line.slice(at).trim().split(/\s+/);
    const value = parseValue(rest[0] ?? "");
    if (value === undefined)
      throw new Error(`prometheus text line ${index + 1}: bad value in "${line}"`);
    samples.push({ name, labels, value });
  }
  return samples;
}

/** Sum of the samples named `name` whose labels include every pair of `labels`. */
export function sumSamples(
  samples: readonly PrometheusSample[],
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** Reads `k="v",...}` from `from`; returns the index after the closing brace. */
function readLabels(line: string, from: number, into: Record<string, string>, lineNo: number) {
  let at = from;
  const fail = (): never => {
    throw new Error(`prometheus text line ${lineNo}: bad labels in "${line}"`);
  };
  for (;;) {
    while (line[at] === " " || line[at] === ",") at++;
    if (line[at] === "}") return at + 1;
    const eq = line.indexOf("=", at);
    if (eq < 0 || line[eq + 1] !== '"') fail();
    const key = line.slice(at, eq).trim();
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(key)) fail();
    let value = "";
    at = eq + 2;
    for (;;) {
      const c = line[at];
      if (c === undefined) fail();
      if (c === '"') break;
      if (c === "\\") {
        const next = line[at + 1];
        value += next === "n" ? "\n" : (next ?? fail());
        at += 2;
        continue;
      }
      value += c;
      at++;
    }
    into[key] = value;
    at++;
  }
}

function parseValue(text: string): number | undefined {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  if (text === "NaN") return Number.NaN;
  if (text === "" || !/^[-+]?[0-9.eE+-]+$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isNaN(value) ? undefined : value;
}
