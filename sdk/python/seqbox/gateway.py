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
                    return json.loads(resp.read())
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
        raise GatewayError(f"{kind} {name}: no gateway answered: {last}")


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
