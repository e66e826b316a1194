"""What the SDK's tests run against: a real `seqbox serve` process (the
binary built from this checkout) on a SQLite file, a remote side (model
and tools) over http.server, and agents, in this process or as their own.

No sleeps: every wait is on a signal (a threading.Event, a line of
output) or on a state the gateway reports, polled, with a deadline that
only bounds a failure.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(SDK))
sys.path.insert(0, SDK)

ADMIN_TOKEN = "sdk-test-admin-token-0123456789"
DEADLINE = 120.0  # bounds a failing wait only

# serve flags under which a failing event is dead-lettered after two
# quick attempts, so that a test that fails does so at once.
FAST_DEAD_LETTER = ("--max-attempts", "2", "--retry-backoff", "10ms", "--max-retry-backoff", "10ms")

_binary = None


def binary():
    """The seqbox binary: SEQBOX_BIN, or built from the checkout once."""
    global _binary
    if _binary:
        return _binary
    if os.environ.get("SEQBOX_BIN"):
        _binary = os.environ["SEQBOX_BIN"]
        return _binary
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the SDK's tests build seqbox with go, which is not on PATH (or set SEQBOX_BIN)")
    out = tempfile.mkdtemp(prefix="seqbox-sdk-bin-")
    subprocess.run([go, "build", "-o", os.path.join(out, "seqbox"), "./cmd/seqbox"], cwd=ROOT, check=True)
    _binary = os.path.join(out, "seqbox")
    return _binary


def wait_until(what, cond):
    """Polls cond until it is true; fails after DEADLINE."""
    end = time.monotonic() + DEADLINE
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        threading.Event().wait(0.02)


class Serve:
    """A `seqbox serve` process in front of agent_url."""

    def __init__(self, db, agent_url, *args):
        self.proc = subprocess.Popen(
            [binary(), "serve", "--db", db, "--addr", "127.0.0.1:0", "--agent-url", agent_url,
             "--admin-token", ADMIN_TOKEN, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                if "listening on http://" in line and not found.is_set():
                    self.url = "http://" + line.split("listening on http://", 1)[1].split()[0].strip('"')
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        found.wait()
        if not hasattr(self, "url"):
            raise RuntimeError("seqbox serve exited before listening:\n" + "".join(self.lines))

    def post(self, event):
        req = urllib.request.Request(self.url + "/v1/events", data=json.dumps(event).encode(), method="POST",
                                     headers={"Content-Type": "application/cloudevents+json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 202, resp.status

    def admin(self, path):
        req = urllib.request.Request(self.url + path, headers={"Authorization": "Bearer " + ADMIN_TOKEN})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def outcome(self, event_id, source="crm"):
        q = urllib.parse.urlencode({"source": source, "id": event_id})
        ids = self.admin("/v1/admin/audit?" + q).get("identities") or []
        return ids[0]["inbox_outcome"] if ids else ""

    def final(self, event_id, source="crm"):
        """The event's outcome, once it has one."""
        return wait_until(f"{source} {event_id}'s outcome", lambda: self.outcome(event_id, source))

    def effects(self, event_id, source="crm"):
        """The effects ledger rows of the event, by action (steps as step:NAME)."""
        return {e["action"]: e for e in self.admin("/v1/admin/effects?consumer=gateway")["effects"]
                if e["source"] == source and e["id"] == event_id}

    def wait_outcome(self, event_id, want="applied"):
        wait_until(f"{event_id} {want}", lambda: self.outcome(event_id) == want)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait()
        self.proc.stderr.close()


def event(event_id, key, version, data=None):
    e = {"specversion": "1.0", "id": event_id, "source": "crm", "type": "order.refund_requested",
         "partitionkey": key, "objectversion": version}
    if data is not None:
        e["data"] = data
    return e


class Remote:
    """The remote side of the example agent's model and tools: it counts
    the model's calls by (event, step) and applies each tool call it gets
    (it does not deduplicate: a second call is a second refund), keeping
    them by idempotency key for a lookup. on_tool(action, key) runs after
    a tool call is applied, before the answer."""

    def __init__(self, on_tool=None):
        self.lock = threading.Lock()
        self.model_calls = {}
        self.tool_calls = {}  # (action, key) -> count
        self.refs = {}
        self.on_tool = on_tool
        remote = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status, body):
                raw = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # its caller was SIGKILLed (on_tool): the call was applied all the same

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path = self.path.strip("/")
                with remote.lock:
                    if path == "model":
                        k = (body["id"], body["step"])
                        remote.model_calls[k] = remote.model_calls.get(k, 0) + 1
                        n = remote.model_calls[k]
                        data = body.get("data") or {}
                        answer = {"refund": data.get("amount", 0), "to": "c@example.com", "answer": n}
                        self._json(200, answer)
                        return
                    key = self.headers["Idempotency-Key"]
                    remote.tool_calls[(path, key)] = remote.tool_calls.get((path, key), 0) + 1
                    ref = remote.refs.setdefault((path, key), f"{path}-{len(remote.refs) + 1}")
                if remote.on_tool:
                    remote.on_tool(path, key)
                self._json(200, {"ref": ref})

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                key = urllib.parse.parse_qs(u.query).get("key", [""])[0]
                with remote.lock:
                    ref = remote.refs.get((u.path.strip("/"), key))
                self._json(200, {"ref": ref}) if ref else self._json(404, {})

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def serve_in_thread(server):
    """Runs an http.server until the test's cleanup shuts it down."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
