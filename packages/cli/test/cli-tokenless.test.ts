import { describeBackend } from "@baton/conformance/harness";
import { expect, it } from "vitest";
import { useBatonRuns } from "./support/baton-runs.js";

describeBackend("redlock", (url) => {
  const run = useBatonRuns();
  const name = () => `cli-tokenless-${Math.random().toString(36).slice(2, 10)}`;
  // The token CMD sees, "unset" when there is none (one from an outer run must not leak in).
  const script = `echo "token=\${BATON_FENCING_TOKEN-unset} lock=\${BATON_LOCK_NAME:-}\${BATON_ELECTION_NAME:-}"`;
  const outer = { BATON_FENCING_TOKEN: "41" };

  it("baton lock on redlock:// runs CMD without BATON_FENCING_TOKEN and warns", async () => {
    const lock = name();
    const r = run(["lock", lock, "--backend", url, "--", "sh", "-c", script], outer);
    expect(await r.exited).toBe(0);
    expect(r.output()).toContain(`token=unset lock=${lock}`);
    expect(r.output()).toMatch(/warning: the redlock backend hands out no ordered fencing token/);
  });

  it("baton elect on redlock:// runs CMD without BATON_FENCING_TOKEN and warns", async () => {
    const election = name();
    const r = run(["elect", election, "--backend", url, "--once", "--", "sh", "-c", script], outer);
    expect(await r.exited).toBe(0);
    expect(r.output()).toContain(`token=unset lock=${election}`);
    expect(r.output()).toMatch(/warning: the redlock backend hands out no ordered fencing token/);
  });
});
