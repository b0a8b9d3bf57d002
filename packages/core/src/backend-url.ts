import { ConfigError } from "./errors.js";

/** One `host[:port]` of a backend URL. */
export interface HostPort {
  /** Host name or address (IPv6 without brackets). */
  readonly host: string;
  /** Port, when given. */
  readonly port: number | undefined;
}

/**
 * A parsed backend URL. Unlike WHATWG `URL`, it accepts the comma-separated host lists that
 * cluster backends use: `etcd://h1:2379,h2:2379`, `zookeeper://h1:2181,h2:2181/chroot`,
 * `redlock://h1:6379,h2:6379,h3:6379`.
 */
export interface BackendUrl {
  /** The URL as given. */
  readonly href: string;
  /** Scheme without `:`, lower case, e.g. `"etcd"`. */
  readonly scheme: string;
  /** Hosts in the order given (may be empty, e.g. `memory://`). */
  readonly hosts: readonly HostPort[];
  /** Decoded user name, or `""`. */
  readonly username: string;
  /** Decoded password, or `""`. */
  readonly password: string;
  /** Path, `""` or starting with `/`. */
  readonly pathname: string;
  /** Query parameters. */
  readonly searchParams: URLSearchParams;
}

const SHAPE = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/(?:([^@/?#]*)@)?([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/;

/** Parses a backend URL; throws `ConfigError` (field `url`) naming the part that is wrong. */
export function parseUrlParts(url: string): BackendUrl {
  const m = SHAPE.exec(url.trim());
  if (m === null) {
    throw new ConfigError(
      "url",
      `"${redact(url)}" is not a URL of the form scheme://host:port,...`,
    );
  }
  const [, scheme = "", auth, hostList = "", pathname = "", query = ""] = m;
  const [user = "", ...rest] = (auth ?? "").split(":");
  const hosts = hostList === "" ? [] : hostList.split(",").map((part) => parseHost(part, url));
  return {
    href: url,
    scheme: scheme.toLowerCase(),
    hosts,
    username: decode(user, url),
    password: decode(rest.join(":"), url),
    pathname: decode(pathname, url),
    searchParams: new URLSearchParams(query),
  };
}

function parseHost(part: string, url: string): HostPort {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+))(?::(\d*))?$/.exec(part);
  if (m === null) {
    throw new ConfigError(
      "url",
      `"${redact(url)}" has a bad host "${part}" (expected host or host:port)`,
    );
  }
  const host = m[1] ?? m[2] ?? "";
  const portText = m[3];
  if (portText === undefined || portText === "") return { host, port: undefined };
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new ConfigError("url", `"${redact(url)}" has a bad port "${portText}" (1 to 65535)`);
  }
  return { host, port };
}

function decode(text: string, url: string): string {
  try {
    return decodeURIComponent(text);
  } catch (cause) {
    throw new ConfigError("url", `"${redact(url)}" has a bad percent-encoding`, { cause });
  }
}

/** Hides a password in a URL before it goes into an error message. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):([^@/]*)@/, "//$1:***@");
}
