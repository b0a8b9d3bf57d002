import { request } from "node:http";

/** Status and body of a plain HTTP GET. */
export interface HttpGetResult {
  /** The HTTP status code. */
  readonly status: number;
  /** The body as UTF-8 text. */
  readonly body: string;
}

/**
 * A plain HTTP GET without keep-alive (so no socket outlives the call).
 *
 * @throws Error on connection failure or after `timeoutMs`
 */
export function httpGet(
  host: string,
  port: number,
  path: string,
  timeoutMs = 1500,
): Promise<HttpGetResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host, port, path, method: "GET", agent: false, timeout: timeoutMs },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`GET ${path} on ${host}:${port} timed out`)));
    req.on("error", reject);
    req.end();
  });
}
