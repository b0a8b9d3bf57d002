#!/usr/bin/env node
// Runs the TypeScript sources through tsx (a workspace dev dependency).
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/main.ts");
process.exitCode = await main(process.argv.slice(2));
