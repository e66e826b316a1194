"""The gateway's agent API: the steps and effects of one event
(docs/agents.md), over urllib."""

import json
import urllib.error
import urllib.parse
import urllib.request

from .errors import GatewayError

TOKEN_HEADER = "Seqbox-Effects-Token"


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the token goes to the gateway's URL and
    nowhere else, and a 3xx is a failure that names its Location."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_RefuseRedirects)


class EventAPI:
    """The agent API of one event, reached with its Seqbox-Effects-Token.

    gateways lists the gateway's base URLs (several serve processes on one
    database are one gateway); a request that cannot connect to one tries
    the next.
    """

    def __init__(self, gateways, source, event_id, token, timeout=10.0):
        self.gateways = [g.rstrip("/") for g in gateways]
        self.token = token
        self.timeout = timeout
        self.prefix = "/v1/events/" + segment(source) + "/" + segment(event_id)

    def call(self, kind, name, body):
        """POST one operation on the step ("step") or effect ("effect")
        name, returning the row as the gateway answers it."""
        path = f"{self.prefix}/{kind}s/{segment(name)}"
        data = encode_json(body)
        last = None
        for base in self.gateways:
            req = urllib.request.Request(base + path, data=data, method="POST", headers={
                "Content-Type": "application/json", TOKEN_HEADER: self.token})
            try:
                with _opener.open(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                if 300 <= e.code < 400:
                    raise GatewayError(f"{kind} {name}: the gateway at {base} answered {e.code} to "
                                       f"{e.headers.get('Location', '(no Location)')}: redirects are not followed, "
                                       f"give the gateway's own URL", e.code) from None
                try:
                    problem = json.loads(e.read() or b"{}")
                except ValueError:
                    problem = {}
                raise GatewayError(f"{kind} {name}: {e.code} {problem.get('detail', '')}", e.code, problem) from None
            except (urllib.error.URLError, OSError) as e:
                last = e
                continue
            return _row(kind, name, base, raw)
        if not self.gateways:
            raise GatewayError(f"{kind} {name}: no gateway to call: Agent was given no URL of the gateway's agent API")
        raise GatewayError(f"{kind} {name}: no gateway answered: {last}")


_STATES = ("pending", "succeeded", "failed", "uncertain")


def _row(kind, name, base, raw):
    """The row of a 2xx answer, or GatewayError naming what is wrong with
    it (a proxy's HTML page, a row without a state)."""
    def bad(what):
        return GatewayError(f"{kind} {name}: the gateway at {base} answered 2xx with {what}: {raw[:120]!r}")
    try:
        row = json.loads(raw)
    except ValueError:
        raise bad("a body that is not JSON") from None
    if not isinstance(row, dict):
        raise bad("a body that is not a JSON object")
    if row.get("state") not in _STATES:
        raise bad("no state of " + ", ".join(_STATES))
    if row.get("granted") and not (isinstance(row.get("call"), int) and isinstance(row.get("heartbeat_ms"), (int, float))):
        raise bad("a grant without its call and heartbeat_ms")
    if "retry_after_ms" in row and not (isinstance(row["retry_after_ms"], (int, float))
                                        and 0 <= row["retry_after_ms"] < float("inf")):
        raise bad("a retry_after_ms that is not a number of milliseconds")
    if kind == "effect" and not isinstance(row.get("idempotency_key"), str):
        raise bad("no idempotency_key")
    return row


def check_url(url):
    """url if it is a gateway's base URL (http or https, a host, no query
    or fragment), else ValueError."""
    u = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if u is None or u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment or "?" in url or "#" in url:
        raise ValueError(f"gateway URL {url!r} is not one: http:// or https://, a host, an optional path, "
                         f"no query or fragment (http://127.0.0.1:8080)")
    return url


def segment(s):
    """s percent-encoded as one path segment. `.` and `..` are encoded
    as %2E: a client or the gateway's router would resolve them away."""
    if s in (".", ".."):
        return s.replace(".", "%2E")
    return urllib.parse.quote(s, safe="")


def encode_json(value):
    """value as compact JSON in UTF-8, the bytes the gateway measures; it
    raises ValueError or TypeError for what JSON cannot hold (NaN,
    Infinity, a set, a cycle)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON allows
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
