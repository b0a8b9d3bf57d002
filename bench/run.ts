/**
 * `npm run bench [-- backend...]`: runs each backend's benchmark (bench/<backend>.ts, which
 * exports `run()` and starts its own servers through the conformance harness).
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ALL = ["redis", "etcd", "zookeeper", "postgres"] as const;
const asked = process.argv.slice(2);
const chosen = asked.length > 0 ? asked : [...ALL];
for (const name of chosen) {
  if (!(ALL as readonly string[]).includes(name)) {
    console.error(`bench: unknown backend "${name}"; choose from ${ALL.join(", ")}`);
    process.exit(2);
  }
}
for (const name of chosen) {
  const file = fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
  if (!existsSync(file)) {
    console.log(`bench: ${name}: no benchmark yet (bench/${name}.ts)`);
    continue;
  }
  const mod = (await import(file)) as { run: () => Promise<void> };
  await mod.run();
}
