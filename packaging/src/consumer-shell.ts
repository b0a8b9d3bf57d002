import { execFile } from "node:child_process";
import { dirname } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const NODE_BIN = dirname(process.execPath);

/** How long one command of a consumer's shell may take: npm installs on a busy machine. */
export const COMMAND_TIMEOUT_MS = 4 * 60_000;

/**
 * The environment of a consumer's shell: the machine's settings (certificates, proxies, npm's
 * user config) without what the workspace adds (npm's script variables, export conditions,
 * the workspace's node_modules/.bin on PATH).
 */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|INIT_CWD$|NODE_OPTIONS$|NODE_PATH$|VITEST|TSX_)/i.test(key)) continue;
    env[key] = value;
  }
  env.PATH = `${NODE_BIN}:/usr/local/bin:/usr/bin:/bin`;
  env.npm_config_update_notifier = "false";
  env.npm_config_fund = "false";
  env.npm_config_audit = "false";
  return env;
}

/**
 * Runs a command in a consumer's shell; resolves with stdout + stderr, rejects with them in
 * the message. `env` adds to (or overrides) {@link cleanEnv}.
 */
export async function sh(
  cwd: string,
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<string> {
  try {
    const { stdout, stderr } = await run(file, args, {
      cwd,
      env: { ...cleanEnv(), ...env },
      maxBuffer: 64 << 20,
      timeout: COMMAND_TIMEOUT_MS,
    });
    return `${stdout}${stderr}`;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${file} ${args.join(" ")} failed in ${cwd}:\n${e.stdout ?? ""}${e.stderr ?? e.message}`,
    );
  }
}

/** A command's exit code (0 or 1) and its output, whether it failed or not. */
export async function shResult(
  cwd: string,
  file: string,
  args: string[],
): Promise<{ code: number; output: string }> {
  try {
    return { code: 0, output: await sh(cwd, file, args) };
  } catch (error) {
    return { code: 1, output: (error as Error).message };
  }
}
