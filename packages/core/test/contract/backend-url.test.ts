import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { parseUrlParts, redactUrl } from "../../src/contract/backend-url.js";
import {
  type BackendUrl,
  ConfigError,
  createCoordinator,
  declareBackendPackage,
  MemoryBackend,
  parseBackendUrl,
  registerBackend,
} from "../../src/index.js";
import { configErrorOf, rejectionOf } from "../support/helpers.js";
import { ScriptedBackend } from "../support/scripted-backend.js";

describe("backend and url", () => {
  it("both backend and url is a ConfigError(backend)", () => {
    const backend = new ScriptedBackend();
    const error = configErrorOf({ backend, url: "memory://" });
    expect(error.field).toBe("backend");
    expect(error.message).toMatch(/exactly one of `backend`.*and `url`/);
    expect(backend.calls.openSession).toBe(0);
  });

  it("neither backend nor url is a ConfigError(backend)", () => {
    const error = configErrorOf({ ttlMs: 1_000 });
    expect(error.field).toBe("backend");
    expect(error.message).toMatch(/exactly one of/);
  });

  it("an empty or blank url is a ConfigError(url) with an example", () => {
    for (const url of ["", "   "]) {
      const error = configErrorOf({ url });
      expect(error.field).toBe("url");
      expect(error.message).toMatch(/redis:\/\/host:6379/);
    }
  });

  it("a url that is not a string is a ConfigError(url)", () => {
    expect(configErrorOf({ url: 6379 }).field).toBe("url");
  });

  it("a string that is not a URL is a ConfigError(url) quoting it", () => {
    const error = configErrorOf({ url: "not a url" });
    expect(error.field).toBe("url");
    expect(error.message).toMatch(/"not a url" is not a URL of the form scheme:\/\/host:port/);
  });

  it("multi-host URLs of the documented forms are accepted without I/O", () => {
    // DESIGN "Config by URL": redlock://h1:6379,h2:6379,..., etcd://h1:2379,h2:2379,
    // zookeeper://h1:2181,h2:2181/chroot. The adapter is loaded on first use, not here.
    for (const url of [
      "etcd://h1:2379,h2:2379,h3:2379",
      "zookeeper://h1:2181,h2:2181/chroot",
      "redlock://h1:6379,h2:6379,h3:6379",
    ]) {
      expect(() => createCoordinator({ url }), url).not.toThrow();
    }
  });

  it("a URL's password is not echoed in the error", () => {
    const error = configErrorOf({ url: "redis://user:hunter2@[bad" });
    expect(error.field).toBe("url");
    expect(error.message).not.toContain("hunter2");
  });

  it("an unknown scheme is a ConfigError(url) naming it and the schemes there are", () => {
    const error = configErrorOf({ url: "mongodb://db:27017" });
    expect(error.field).toBe("url");
    expect(error.message).toMatch(/unknown scheme "mongodb:"/);
    for (const scheme of ["redis://", "etcd://", "zookeeper://", "postgres://", "memory://"]) {
      expect(error.message).toContain(scheme);
    }
  });

  it("a missing adapter package is a ConfigError(url) naming it, on first acquire", async () => {
    // A scheme served by a package that is not installed (as @baton/etcd would be, without it).
    declareBackendPackage("acme-missing", "@acme/baton-missing-adapter");
    // No I/O at construction: the adapter is loaded lazily.
    const coordinator = createCoordinator({ url: "acme-missing://127.0.0.1:2379", ttlMs: 5_000 });
    const error = await rejectionOf(coordinator.acquire("jobs", { waitMs: 0 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ field: "url" });
    expect((error as Error).message).toContain("@acme/baton-missing-adapter");
    expect((error as Error).message).toMatch(/npm install @acme\/baton-missing-adapter/);
    await expect(coordinator.backend()).rejects.toBeInstanceOf(ConfigError);
  });
});

/** URLs a user may write, with what they mean by WHATWG rules; `secret` must never be printed. */
const ACCEPTED: ReadonlyArray<{
  url: string;
  username: string;
  password: string;
  hosts: ReadonlyArray<{ host: string; port: number | undefined }>;
  pathname?: string;
  secret?: string;
}> = [
  // The user info ends at the last "@" of the authority, as in Node's URL.
  {
    url: "redis://u:pa@ss@host",
    username: "u",
    password: "pa@ss",
    hosts: [{ host: "host", port: undefined }],
    secret: "pa@ss",
  },
  {
    url: "redis://app:p%40ss%3Aw%2Fo%3Fr%23d%25@cache:6379/0",
    username: "app",
    password: "p@ss:w/o?r#d%",
    hosts: [{ host: "cache", port: 6379 }],
    pathname: "/0",
    secret: "p%40ss",
  },
  {
    url: "redis://u:a:b:c@h:1",
    username: "u",
    password: "a:b:c",
    hosts: [{ host: "h", port: 1 }],
    secret: "a:b:c",
  },
  {
    url: "redis://TOKEN-0123456789@host:6379",
    username: "TOKEN-0123456789",
    password: "",
    hosts: [{ host: "host", port: 6379 }],
    secret: "TOKEN-0123456789",
  },
  {
    url: "redis://:only-a-password@host",
    username: "",
    password: "only-a-password",
    hosts: [{ host: "host", port: undefined }],
    secret: "only-a-password",
  },
  {
    url: "postgres://us%C3%A9r:p%C3%A4ss w@db/app",
    username: "usér",
    password: "päss w",
    hosts: [{ host: "db", port: undefined }],
    pathname: "/app",
    secret: "päss",
  },
  {
    url: "etcd://root:pw@[::1]:2379,[FE80:0::1]:2380,h3",
    username: "root",
    password: "pw",
    hosts: [
      { host: "::1", port: 2379 },
      { host: "fe80::1", port: 2380 },
      { host: "h3", port: undefined },
    ],
  },
  {
    url: "zookeeper://h1:2181,h2,h3:2183/apps/billing",
    username: "",
    password: "",
    hosts: [
      { host: "h1", port: 2181 },
      { host: "h2", port: undefined },
      { host: "h3", port: 2183 },
    ],
    pathname: "/apps/billing",
  },
  {
    url: "redis://bücher.example:6379",
    username: "",
    password: "",
    hosts: [{ host: "xn--bcher-kva.example", port: 6379 }],
  },
  {
    url: "postgres://%2Fvar%2Frun%2Fpostgresql/app",
    username: "",
    password: "",
    hosts: [{ host: "/var/run/postgresql", port: undefined }],
    pathname: "/app",
  },
  { url: "memory://", username: "", password: "", hosts: [] },
];

/** URLs that must be refused; the message must not contain `secret`. */
const REFUSED: ReadonlyArray<{ url: string; secret: string; message: RegExp }> = [
  // By WHATWG rules the authority ends at "/", "?" or "#": the rest of the password would be
  // read as a host and port, or a path. Refused, with how to spell it.
  { url: "redis://u:s3/cret@host:6379", secret: "s3", message: /"@" after the host.*%2F/ },
  { url: "redis://u:s3?cret@host:6379", secret: "s3", message: /"@" after the host.*%3F/ },
  { url: "redis://u:s3#cret@host:6379", secret: "s3", message: /has a "#".*%23/ },
  { url: "redis://TOK/EN@host", secret: "TOK", message: /"@" after the host/ },
  { url: "redis://u:Qx7%zz@host", secret: "Qx7", message: /bad percent-encoding.*%25/ },
  { url: "redis://u:%ff%fe@host", secret: "%ff%fe", message: /bad percent-encoding/ },
  { url: "redis://u:pw@host:65536", secret: "pw", message: /bad port "65536"/ },
  { url: "redis://u:pw@host:0", secret: "pw", message: /bad port "0"/ },
  { url: "redis://u:pw@host:-1", secret: "pw", message: /bad port/ },
  { url: "redis://u:pw@[::1", secret: "pw", message: /bad host/ },
  { url: "redis://u:pw@h1,,h2", secret: "pw", message: /empty or bad host/ },
  { url: "redis://u:pw@ho st", secret: "pw", message: /bad host "ho st"/ },
  // A password whose "@host" went missing reads as a port: the port is not quoted.
  { url: "redis://user:hunter2", secret: "hunter2", message: /bad port \(/ },
  { url: "redis://:hunter2", secret: "hunter2", message: /empty or bad host/ },
  { url: "u:hunter2@host", secret: "hunter2", message: /not a URL of the form/ },
  { url: "etcd://u:pw@a:1?prefix=x&prefix=y", secret: "pw", message: /"prefix" twice/ },
];

describe("backend URLs are parsed by WHATWG rules and never print a credential", () => {
  for (const c of ACCEPTED) {
    it(`parses ${c.url}`, () => {
      const parsed = parseUrlParts(c.url);
      expect(parsed).toMatchObject({
        username: c.username,
        password: c.password,
        hosts: c.hosts,
        pathname: c.pathname ?? "",
      });
      if (c.secret !== undefined) expect(redactUrl(c.url)).not.toContain(c.secret);
    });
  }

  for (const c of REFUSED) {
    it(`refuses ${c.url} without printing the credential`, () => {
      let error: unknown;
      try {
        parseUrlParts(c.url);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("url");
      expect((error as Error).message).toMatch(c.message);
      // Nothing reachable from the error (message, stack, cause) holds the secret.
      expect(inspect(error, { depth: 10 })).not.toContain(c.secret);
      // The same through createCoordinator (the error users see).
      expect(inspect(configErrorOf({ url: c.url }), { depth: 10 })).not.toContain(c.secret);
    });
  }

  it("redactUrl hides the user info up to the last @ and secret-looking parameters", () => {
    expect(redactUrl("redis://app:s3cret@cache:6379/0")).toBe("redis://***@cache:6379/0");
    expect(redactUrl("redis://TOKEN@cache")).toBe("redis://***@cache");
    expect(redactUrl("redis://u:a@b/c#d@host:1")).toBe("redis://***@host:1");
    expect(redactUrl("etcd://h1:2379,h2:2379?prefix=x")).toBe("etcd://h1:2379,h2:2379?prefix=x");
    expect(redactUrl("postgres://db/app?password=pw&sslmode=require")).toBe(
      "postgres://db/app?password=***&sslmode=require",
    );
    expect(redactUrl("u:pw@host")).toBe("***@host");
    expect(redactUrl("redis://user:hunter2/0")).toBe("redis://user:***/0");
    expect(redactUrl("redis://h1:6379,[::1]:x,h3:")).toBe("redis://h1:6379,[::1]:***,h3:");
  });
});

describe("URL options are checked in createCoordinator, before any I/O", () => {
  it("memory://?prefx= fails at construction", () => {
    const error = configErrorOf({ url: "memory://?prefx=jobs" });
    expect(error.field).toBe("url");
    expect(error.message).toContain("prefx");
  });

  it("a registered adapter's URL check runs at construction; its factory is not called", () => {
    let built = 0;
    const checked: BackendUrl[] = [];
    registerBackend(
      "check-test",
      () => {
        built++;
        return new MemoryBackend();
      },
      {
        checkUrl: (url) => {
          checked.push(url);
          const unknown = [...url.searchParams.keys()].find((k) => k !== "prefix");
          if (unknown !== undefined)
            throw new ConfigError("prefix", `unknown parameter "${unknown}"`);
        },
      },
    );
    const error = configErrorOf({ url: "check-test://db:1?prefx=a" });
    expect(error.field).toBe("prefix");
    expect(error.message).toContain('unknown parameter "prefx"');
    expect(built).toBe(0);
    expect(() => parseBackendUrl("check-test://db:1?prefx=a")).toThrow(ConfigError);

    const coordinator = createCoordinator({ url: "check-test://db:1?prefix=a" });
    expect(checked.at(-1)?.searchParams.get("prefix")).toBe("a");
    expect(built).toBe(0);
    void coordinator.close();
  });

  it("a check that is not a function is refused", () => {
    expect(() =>
      registerBackend("check-test-2", () => new MemoryBackend(), {
        checkUrl: 42 as unknown as () => void,
      }),
    ).toThrow(ConfigError);
  });
});
