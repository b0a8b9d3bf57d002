import { redactUrl } from "@baton/core";
import type { RedisClient } from "./redis-client.js";

/**
 * Where `client` connects, for messages: `host:port` of a single node, or the startup nodes of
 * a cluster client; never credentials. `undefined` when the client does not say.
 */
export function clientAddress(client: RedisClient): string | undefined {
  const c = client as {
    options?: { host?: unknown; port?: unknown; path?: unknown };
    startupNodes?: unknown;
  };
  if (Array.isArray(c.startupNodes)) {
    const nodes = c.startupNodes.map(formatNode).filter((n) => n !== undefined);
    return nodes.length === 0 ? undefined : nodes.join(", ");
  }
  if (typeof c.options?.path === "string") return c.options.path;
  return formatNode(c.options);
}

function formatNode(node: unknown): string | undefined {
  if (typeof node === "number") return `127.0.0.1:${node}`;
  if (typeof node === "string") return redactUrl(node);
  const n = node as { host?: unknown; port?: unknown } | undefined;
  if (typeof n?.host !== "string") return undefined;
  const host = n.host.includes(":") ? `[${n.host}]` : n.host;
  return typeof n.port === "number" ? `${host}:${n.port}` : host;
}
