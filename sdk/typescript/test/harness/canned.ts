/**
 * A local HTTP server with one canned answer, for what a real gateway
 * cannot be made to answer (a redirect, a proxy's page, a refusal).
 * @module
 */

import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

/** A local HTTP server that answers every request with status, headers and body, and keeps what it received. */
export async function canned(
  t: TestContext,
  status: number,
  body = "",
  headers: Record<string, string> = {},
): Promise<{ url: string; received: { path: string; headers: IncomingHttpHeaders }[] }> {
  const received: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received.push({ path: req.url ?? "", headers: req.headers });
      res.writeHead(status, headers).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

