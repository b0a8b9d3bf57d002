import { describe, expect, it } from "vitest";
import { parsePrometheusText, sumSamples } from "../src/suite/prometheus-text.js";

const TEXT = `# HELP baton_is_leader 1 while this instance leads the election
# TYPE baton_is_leader gauge
baton_is_leader{name="jobs/a"} 1
baton_is_leader{name="jobs/b"} 0

# TYPE baton_failover_seconds histogram
baton_failover_seconds_bucket{le="+Inf",name="jobs/a"} 2
baton_failover_seconds_sum{name="jobs/a"} 1.25e-1
baton_failover_seconds_count{name="jobs/a"} 2 1700000000000
up 1
odd{name="say \\"hi\\", ok",path="a\\\\b"} -3
`;

describe("parsePrometheusText", () => {
  it("reads names, labels (with escapes), values and ignores comments and timestamps", () => {
    const samples = parsePrometheusText(TEXT);
    expect(samples).toHaveLength(7);
    expect(samples[0]).toEqual({ name: "baton_is_leader", labels: { name: "jobs/a" }, value: 1 });
    expect(samples[2]?.labels).toEqual({ le: "+Inf", name: "jobs/a" });
    expect(samples[3]?.value).toBe(0.125);
    expect(samples[4]?.value).toBe(2);
    expect(samples[5]).toEqual({ name: "up", labels: {}, value: 1 });
    expect(samples[6]).toEqual({
      name: "odd",
      labels: { name: 'say "hi", ok', path: "a\\b" },
      value: -3,
    });
  });

  it("sums the samples whose labels match", () => {
    const samples = parsePrometheusText(TEXT);
    expect(sumSamples(samples, "baton_is_leader")).toBe(1);
    expect(sumSamples(samples, "baton_is_leader", { name: "jobs/b" })).toBe(0);
    expect(sumSamples(samples, "baton_failover_seconds_count", { name: "jobs/a" })).toBe(2);
    expect(sumSamples(samples, "missing")).toBe(0);
  });

  it("throws on a line it cannot read instead of counting it as zero", () => {
    expect(() => parsePrometheusText('baton_is_leader{name="a"}')).toThrow(/line 1/);
    expect(() => parsePrometheusText('baton_is_leader{name="a} 1')).toThrow(/line 1/);
    expect(() => parsePrometheusText("baton_is_leader abc")).toThrow(/line 1/);
  });
});
