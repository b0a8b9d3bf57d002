/**
 * `npm run compare`: starts every server installed locally (through the conformance harness,
 * on loopback), plays the invoice story on each backend in efficiency and correctness mode,
 * prints the table and writes compare-report/compare-report.md with one SVG timeline per backend.
 */

import { main } from "@baton/cli";
import { startServers } from "@baton/conformance/harness";

const started = await startServers({});
const s = started.servers;
const args: string[] = ["compare", "--backend", "memory://compare", "--out", "compare-report"];
for (const url of [s.redis, s.redlock, s.etcd, s.zookeeper, s.postgres]) {
  if (url !== undefined) args.push("--backend", url);
}
for (const [kind, why] of Object.entries(s.unavailable))
  console.error(`compare: skipping ${kind}: ${why}`);
let code = 1;
try {
  code = await main(args);
} finally {
  await started.stop();
}
process.exit(code);
