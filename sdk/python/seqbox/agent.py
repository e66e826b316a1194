"""The agent contract of `seqbox serve --agent-url` (docs/gateway.md,
docs/agents.md): a request in, an answer out, whatever serves HTTP."""

import json
import math
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .context import Context
from .errors import GatewayError, Permanent, Retry, Stale, Waiting
from .gateway import check_url, encode_json

PROBLEMS = "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#"


class Response:
    """What the agent answers: a status, headers and a body."""

    def __init__(self, status, body=b"", headers=None):
        self.status = status
        self.body = body
        self.headers = headers or {}


def _problem(status, kind, detail, **more):
    body = {"type": more.pop("type", "about:blank"), "title": kind, "status": status, "detail": detail}
    body.update(more)
    return Response(status, json.dumps(body).encode(), {"Content-Type": "application/problem+json"})


class Agent:
    """An agent: handler(ctx) runs once the event is parsed, with ctx a
    Context. It returns None (204) or a JSON value (200), or raises
    Permanent (422), Retry (503 with Retry-After), Stale or
    VersionConflict (409 with the outcome). gateways are the base URLs of
    the gateway's agent API (one string or a list; one that is not an
    http or https URL raises ValueError at once; an empty list, for a
    gateway set later, answers 503 until one is); timeout is the seconds
    a request of the agent API may take (default 10; a number more than
    0, ValueError otherwise); log(message) is
    where a handler's unexpected error is written (default: stderr).

    A refusal of the gateway that concerns this event alone (400, 403,
    404, 405, 413), a bad step or effect name, or a step result JSON
    cannot hold (NaN, Infinity, a set, a cycle) or over 256 KiB answers
    422, as Permanent does; a gateway that is down (5xx, no connection)
    503. A handler result JSON cannot hold answers a 500 problem."""

    def __init__(self, handler, gateways, timeout=10.0, log=None):
        if not callable(handler):
            raise TypeError(f"Agent: handler is {handler!r} ({type(handler).__name__}): a function of ctx")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise ValueError(f"Agent: timeout is {timeout!r} ({type(timeout).__name__}): seconds, a number")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"Agent: timeout is {timeout}: seconds, finite and more than 0")
        self.handler = handler
        self.gateways = gateways
        self.timeout = float(timeout)
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    @property
    def gateways(self):
        """The gateway's base URLs (a list). Set it before the first event
        when the gateway starts after the agent; a string is one URL."""
        return self._gateways

    @gateways.setter
    def gateways(self, gateways):
        gateways = [gateways] if isinstance(gateways, str) else list(gateways)
        self._gateways = [check_url(g) for g in gateways]

    def handle(self, method, headers, body):
        """Answers one request: headers is a mapping whose get() takes the
        header names as the gateway writes them (any case for
        http.server's and WSGI's, which this module adapts)."""
        if method in ("GET", "HEAD"):
            return Response(200, b"" if method == "HEAD" else b"seqbox agent\n", {"Content-Type": "text/plain"})
        if method != "POST":
            return _problem(405, "Method Not Allowed", "POST an event, GET or HEAD to probe")
        try:
            event = json.loads(body)
            if not isinstance(event, dict) or not all(isinstance(event.get(a), str) for a in ("id", "source", "type")):
                raise ValueError("not a CloudEvent with id, source and type")
            ctx = Context(event, headers, self.gateways, self.timeout)
        except (ValueError, UnicodeDecodeError) as e:
            return _problem(400, "Bad Request", f"the body is not a structured CloudEvent: {e}")
        except RecursionError:
            # The gateway takes any depth; Python's json stops near 1,000
            # levels. A definite answer, not a dropped connection (which
            # leaves the gateway's call uncertain).
            return _problem(400, "Bad Request", "the body nests deeper than Python's JSON decoder reads "
                            f"(sys.getrecursionlimit() is {sys.getrecursionlimit()})")
        try:
            out = self.handler(ctx)
        except Stale as e:
            return _problem(409, "Conflict", str(e) or e.outcome, outcome=e.outcome)
        except Permanent as e:
            return _problem(422, "Unprocessable Content", str(e))
        except Waiting as e:
            resp = _problem(503, "Service Unavailable", str(e), type=PROBLEMS + "agent-waits", **{e.kind: e.call_name})
            resp.headers["Retry-After"] = str(max(1, math.ceil(e.after)))
            return resp
        except Retry as e:
            return _retry(str(e), e.after)
        except GatewayError as e:
            if e.definite:
                return _problem(422, "Unprocessable Content", f"the gateway refused it: {e}")
            return _retry(str(e), 1)
        except Exception as e:
            self.log("seqbox agent: the handler failed on %s: %s" % (ctx.id, "".join(traceback.format_exception(e))))
            return _problem(500, "Internal Server Error", f"{type(e).__name__}: {e}")
        named = {}
        if ctx.result_reference:
            # Its UTF-8 bytes as they are: the gateway reads the header's
            # bytes, and http.server writes a str as Latin-1.
            named["Seqbox-Result-Reference"] = ctx.result_reference.encode("utf-8").decode("latin-1")
        if out is None:
            return Response(204, headers=named)
        try:
            body = encode_json(out)
        except (TypeError, ValueError, RecursionError) as e:
            self.log("seqbox agent: the handler's result on %s is not JSON: %s: %s" % (ctx.id, type(e).__name__, e))
            return _problem(500, "Internal Server Error",
                            f"the handler's result is not JSON (NaN or Infinity, a set, a cycle...): {type(e).__name__}: {e}")
        return Response(200, body, {"Content-Type": "application/json", **named})

    def wsgi(self, environ, start_response):
        """The agent as a WSGI application (wsgiref, gunicorn, a
        framework's mount point)."""
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        if size:
            body = environ["wsgi.input"].read(size)
        elif environ.get("wsgi.input_terminated"):  # a chunked body the server decoded (gunicorn, ...)
            body = environ["wsgi.input"].read()
        else:
            body = b""
        headers = _Headers({k[5:].replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")})
        resp = self.handle(environ["REQUEST_METHOD"], headers, body)
        start_response(f"{resp.status} {_REASONS.get(resp.status, 'Status')}", list(resp.headers.items()))
        return [resp.body]

    def serve(self, host, port):
        """Serves the agent over http.server on host:port, a thread per
        request, until the process ends; returns the server (its
        server_address has the port when port is 0)."""
        agent = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                try:
                    body = _read_body(self.rfile, self.headers)
                except ValueError as e:
                    self.close_connection = True
                    resp = _problem(400, "Bad Request", f"the body cannot be read: {e}")
                    self.send_response(resp.status)
                    self.send_header("Content-Type", resp.headers["Content-Type"])
                    self.send_header("Content-Length", str(len(resp.body)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(resp.body)
                    return
                resp = agent.handle(self.command, _Headers(dict(self.headers.items())), body)
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(resp.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(resp.body)

            do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args):
                pass

        return ThreadingHTTPServer((host, port), Handler)


def _read_body(rfile, headers):
    """The request's body: Content-Length bytes, or a chunked body
    (Transfer-Encoding: chunked) decoded; ValueError when it is neither."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        parts = []
        while True:
            line = rfile.readline(1 << 16)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ValueError(f"a chunk's size is not hex: {line[:40]!r}") from None
            if size == 0:
                while rfile.readline(1 << 16) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            chunk = rfile.read(size)
            if len(chunk) != size or rfile.readline(1 << 16) not in (b"\r\n", b"\n"):
                raise ValueError("a chunk ends early")
            parts.append(chunk)
    try:
        size = int(headers.get("Content-Length") or 0)
    except ValueError:
        raise ValueError("Content-Length is not a number") from None
    return rfile.read(size) if size > 0 else b""


def _retry(detail, after):
    resp = _problem(503, "Service Unavailable", detail)
    resp.headers["Retry-After"] = str(max(1, math.ceil(after)))
    return resp


class _Headers(dict):
    """Header names matched in any case."""

    def __init__(self, items):
        super().__init__({k.lower(): v for k, v in items.items()})

    def get(self, name, default=None):
        return super().get(name.lower(), default)


_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 405: "Method Not Allowed", 409: "Conflict",
            422: "Unprocessable Content", 500: "Internal Server Error", 503: "Service Unavailable"}
