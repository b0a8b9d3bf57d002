import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PackedPackage } from "./pack-workspace.js";

/** A package registry on loopback that serves only the packed `@baton/*` tarballs. */
export interface ScopedRegistry {
  /** Base URL, e.g. `http://127.0.0.1:PORT/`. */
  readonly url: string;
  /** npm arguments that fetch the `@baton` scope from here (everything else from the usual registry). */
  readonly npmArgs: readonly string[];
  close(): Promise<void>;
}

/**
 * Serves `packages` the way a registry does (a packument per name, the tarball behind it), so a
 * project outside the repository installs them by name and version, exactly as users will once
 * they are published, with every other dependency from the npm registry.
 */
export async function startScopedRegistry(
  packages: readonly PackedPackage[],
): Promise<ScopedRegistry> {
  const tarballs = new Map<string, Buffer>();
  const packuments = new Map<string, string>();
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(req.url ?? "/");
    const tarball = tarballs.get(path);
    const packument = packuments.get(path.replace(/^\//, ""));
    res.setHeader("cache-control", "no-store");
    if (tarball !== undefined) {
      res.writeHead(200, { "content-type": "application/octet-stream" }).end(tarball);
    } else if (packument !== undefined) {
      res.writeHead(200, { "content-type": "application/json" }).end(packument);
    } else {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  for (const pkg of packages) {
    const bytes = readFileSync(pkg.tarball);
    const file = `/${pkg.name}/-/${pkg.name.split("/")[1]}-${pkg.version}.tgz`;
    tarballs.set(file, bytes);
    const dist = {
      tarball: `${url}${file.slice(1)}`,
      shasum: createHash("sha1").update(bytes).digest("hex"),
      integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    };
    packuments.set(
      pkg.name,
      JSON.stringify({
        name: pkg.name,
        "dist-tags": { latest: pkg.version },
        versions: { [pkg.version]: { ...pkg.manifest, dist } },
      }),
    );
  }
  return {
    url,
    npmArgs: [`--@baton:registry=${url}`],
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
