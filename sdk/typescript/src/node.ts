/**
 * The agent on Node's `http`: an adapter from IncomingMessage and
 * ServerResponse to the Fetch API's Request and Response.
 * @module
 */

import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";

/** A Fetch API handler, such as {@link Agent.handle}. */
export type FetchHandler = (request: Request) => Promise<Response>;

/**
 * A request listener for `http.createServer` that hands each request to
 * handler as a Request and writes its Response back. A request that is
 * not one (a Host header no URL takes) answers 400; a handler that
 * throws, 500.
 */
export function toNodeListener(handler: FetchHandler): RequestListener {
  return (req, res) => {
    answer(handler, req, res).catch((e: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { "Content-Type": "text/plain" });
      }
      res.end(`seqbox agent: ${e instanceof Error ? e.message : String(e)}\n`);
    });
  };
}

async function answer(handler: FetchHandler, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    chunks.push(chunk as Buffer);
  }
  let request: Request;
  try {
    request = toRequest(req, Buffer.concat(chunks));
  } catch (e) {
    res.writeHead(400, { "Content-Type": "text/plain" });
    res.end(`bad request: ${e instanceof Error ? e.message : String(e)}\n`);
    return;
  }
  const response = await handler(request);
  const body = Buffer.from(await response.arrayBuffer());
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  headers["content-length"] = String(body.length);
  res.writeHead(response.status, headers);
  res.end(req.method === "HEAD" ? undefined : body);
}

/** req, its body read, as a Fetch API Request. */
function toRequest(req: IncomingMessage, body: Buffer): Request {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  }
  const url = new URL(req.url ?? "/", `http://${req.headers.host ?? "localhost"}`);
  const method = req.method ?? "GET";
  return new Request(url, {
    method,
    headers,
    ...(method === "GET" || method === "HEAD" ? {} : { body }),
  });
}
