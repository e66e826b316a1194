"""A seqbox agent: the HTTP server `seqbox serve --agent-url` POSTs events to.

Standard library only. Run it as `python3 agent.py [HOST:PORT]` (default
127.0.0.1:9000). It prints one line per event it applies.

The contract (docs/gateway.md): the body is the CloudEvent as JSON; the
headers carry Idempotency-Key (the same on every retry of one event),
Seqbox-Partition-Key and Seqbox-Object-Version. Answer 2xx once applied,
409 with a problem body saying "stale" or "version_conflict" to refuse a
version, another 4xx to dead-letter the event, 408, 429 or 5xx to have it
retried. seqbox sends a key's events one at a time, in order. A GET
answers 204, for a script that waits until the agent is up.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

applied = set()  # the Idempotency-Keys already applied: a retry is not applied twice


class Agent(BaseHTTPRequestHandler):
    def do_POST(self):
        event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers["Idempotency-Key"]
        if key not in applied:
            applied.add(key)  # a real agent keeps this in its own database
            print("agent: applied", event["type"], "to", event.get("partitionkey"),
                  "version", self.headers.get("Seqbox-Object-Version"),
                  "(event", event["id"], "from", event["source"] + ")", flush=True)
        self.send_response(204)
        self.end_headers()

    def do_GET(self):
        self.send_response(204)  # up: what the quick start waits for
        self.end_headers()

    def log_message(self, format, *args):
        pass  # the line above is the log


host, _, port = (sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9000").rpartition(":")
HTTPServer((host, int(port)), Agent).serve_forever()
