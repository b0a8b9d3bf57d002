import { parseBackendUrl } from "@baton/core";
import { TcpProxy } from "./tcp-proxy.js";

/** A backend URL routed through one {@link TcpProxy} per host. */
export interface ProxiedHosts {
  /** The same URL (scheme, credentials, path and query kept) with the proxies as its hosts. */
  readonly url: string;
  /** `host:port` of each proxy, in the order of the URL's hosts. */
  readonly hosts: readonly string[];
  readonly proxies: readonly TcpProxy[];
  /** Closes every proxy and the connections through them. */
  close(): Promise<void>;
}

/**
 * Puts a {@link TcpProxy} in front of every `host:port` of a backend URL (`redis://h:p`,
 * `etcd://h1:p1,h2:p2`, ...) and returns the URL through them, for fault tests that cut,
 * blackhole, delay or drop a client's traffic. `firstHostOnly`: proxy the first host only
 * (one member standing for a cluster). Throws for a URL with a host without a port.
 */
export async function proxyHosts(
  url: string,
  options: { firstHostOnly?: boolean } = {},
): Promise<ProxiedHosts> {
  const parsed = parseBackendUrl(url);
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/.exec(url.trim());
  if (m === null || parsed.hosts.length === 0 || parsed.hosts.some((h) => h.port === undefined)) {
    throw new Error(`proxyHosts: ${url} names no host:port to put a proxy in front of`);
  }
  const targets = options.firstHostOnly === true ? parsed.hosts.slice(0, 1) : parsed.hosts;
  const proxies = await Promise.all(
    targets.map((h) => TcpProxy.start({ host: h.host, port: h.port as number })),
  );
  const hosts = proxies.map((p) => `${p.host}:${p.port}`);
  return {
    url: `${m[1]}${m[2] ?? ""}${hosts.join(",")}${m[4]}`,
    hosts,
    proxies,
    close: async () => {
      await Promise.all(proxies.map((p) => p.close()));
    },
  };
}
