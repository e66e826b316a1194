"""The same agent as a WSGI application, the request handler shape of
Flask, Django and most Python web frameworks (here served by wsgiref):
seqbox.Agent.wsgi is the application, mountable at any path.

    python3 wsgi_agent.py LISTEN GATEWAY [REMOTE]
"""

import os
import sys
from wsgiref.simple_server import WSGIRequestHandler, make_server

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import seqbox  # noqa: E402
from refund_agent import LocalWorld, RemoteWorld, handler  # noqa: E402


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def application(gateway, remote=None):
    """The WSGI application of the refund agent."""
    world = RemoteWorld(remote) if remote else LocalWorld()
    return seqbox.Agent(handler(world), gateway.split(",")).wsgi


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    app = application(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    with make_server(host, int(port), app, handler_class=QuietHandler) as server:
        print(f"agent: listening on http://{host}:{server.server_address[1]} (WSGI)", flush=True)
        server.serve_forever()
