"""An example agent over http.server: a stub model decides a refund once
per event (a memoised step), then two tools run once each (effects): a
refund and an email. Standard library only.

    python3 refund_agent.py LISTEN GATEWAY[,GATEWAY...] [REMOTE]

LISTEN is host:port; GATEWAY the base URL of `seqbox serve` (several,
comma-separated, for serve processes sharing a database). Without REMOTE
the model and the tools are stubs in this process that print what they
do; with it (a base URL) they are HTTP calls to it: POST /model, POST
/refund and /email with the Idempotency-Key header, and GET
/refund?key=K and /email?key=K to find a call by its key (404: none),
which is what the chaos harness and the tests serve.
"""

import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import seqbox  # noqa: E402


class LocalWorld:
    """The model and the tools as stubs in this process."""

    def __init__(self):
        self.done = {}  # tool calls by idempotency key (a real remote keeps them)

    def model(self, ctx, step):
        print(f"model: asked to {step} {ctx.id}", flush=True)
        data = ctx.data or {}
        return {"refund": data.get("amount", 0), "to": data.get("customer", "customer@example.com")}

    def tool(self, action, key, body):
        ref = self.done.setdefault(key, f"{action}-{len(self.done) + 1}")
        print(f"{action}: {ref} {json.dumps(body, sort_keys=True)} (key {key})", flush=True)
        return ref

    def find(self, action, key):
        return self.done.get(key)


class RemoteWorld:
    """The model and the tools behind a remote base URL."""

    def __init__(self, base):
        self.base = base.rstrip("/")

    def _post(self, path, body, key=None):
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            if 400 <= e.code < 500 and e.code not in (408, 429):
                raise seqbox.Permanent(f"{path} refused: {e.code}") from None
            raise

    def model(self, ctx, step):
        return self._post("/model", {"source": ctx.source, "id": ctx.id, "step": step, "data": ctx.data})

    def tool(self, action, key, body):
        return self._post("/" + action, body, key)["ref"]

    def find(self, action, key):
        try:
            with urllib.request.urlopen(f"{self.base}/{action}?key={key}", timeout=10) as resp:
                return json.loads(resp.read())["ref"]
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise


def handler(world):
    def handle(ctx):
        if not isinstance(ctx.data, dict) or "order" not in ctx.data:
            raise seqbox.Permanent("data.order is missing: nothing to refund")
        plan = ctx.step("plan", lambda: world.model(ctx, "plan"))
        about = {"order": ctx.data["order"], "event": ctx.id, "key": ctx.key}
        refund = ""
        if plan["refund"]:
            refund = ctx.effect("refund", lambda key: world.tool("refund", key, {**about, "amount": plan["refund"]}),
                                reconcile=lambda key: world.find("refund", key))
        email = ctx.effect("email", lambda key: world.tool("email", key, {**about, "to": plan["to"], "refund": refund}),
                           reconcile=lambda key: world.find("email", key))
        print(f"agent: {ctx.id} done: refund {refund or 'none'}, email {email}", flush=True)
        return {"refund": refund, "email": email}
    return handle


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    host, port = argv[1].rsplit(":", 1)
    world = RemoteWorld(argv[3]) if len(argv) > 3 else LocalWorld()
    server = seqbox.Agent(handler(world), argv[2].split(",")).serve(host, int(port))
    print(f"agent: listening on http://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv)
