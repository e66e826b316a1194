/**
 * The answers of the agent contract as Fetch API responses: problem
 * documents (RFC 9457) and the 503 that asks for a retry.
 * @module
 */

/** Where the gateway's problem types are documented. */
export const PROBLEMS = "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#";

/** A problem+json response: status, its title, a detail and more members. */
export function problem(
  status: number,
  title: string,
  detail: string,
  more: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Response {
  const body = { type: "about:blank", title, status, detail, ...more };
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

/** A 503 whose `Retry-After` is after seconds, rounded up, at least 1. */
export function retryLater(detail: string, after: number, more: Record<string, unknown> = {}): Response {
  return problem(503, "Service Unavailable", detail, more, { "Retry-After": String(Math.max(1, Math.ceil(after))) });
}
