"""Run one of the collection's modules as Ansible runs it on a host: a fresh interpreter, its arguments as JSON
on stdin, its result as JSON on stdout."""
import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading

import pytest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# a bound for a hung module, not a speed test: the SM120 judge compiles with Triton, 10 s alone and 73 s in a CI run
# whose other workers had the machine's two cores (two such runs were stopped at the 120 s this bound was)
HANG_BOUND = 600


def run_module(name, args, *, env=None, path_prepend=None):
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(REPO / ".collections"), full.get("PYTHONPATH", "")])
    if path_prepend:
        full["PATH"] = f"{path_prepend}{os.pathsep}{full['PATH']}"
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-m", f"ansible_collections.blackwell.serving.plugins.modules.{name}"],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), capture_output=True, text=True,
                          env=full, timeout=HANG_BOUND)
    try:
        return json.loads(proc.stdout)
    except ValueError as exc:
        raise AssertionError(f"{name} printed no JSON: {proc.stdout!r} {proc.stderr!r}") from exc


@contextlib.contextmanager
def serve(answer):
    """A small HTTP server on loopback: ``answer(path)`` gives (status, body bytes) for each GET."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@contextlib.contextmanager
def serve_in_turn(*answers):
    """serve() that gives the answers, each (status, body bytes), in turn to the GETs it is asked, the last one to every
    GET after it; yields (url, the paths asked, in order)."""
    asked = []

    def answer(path):
        asked.append(path)
        return answers[min(len(asked), len(answers)) - 1]

    with serve(answer) as url:
        yield url, asked


class FakeRouter:
    """The worker API of sglang-router 0.3.x as the module uses it: GET/POST /workers, DELETE /workers/ID (queued:
    202), and a server's /metrics with sglang's gauges. As the real router (the pinned sglang_router_version, src/core/worker_service.rs
    create_worker), a router with an API key warns of a worker added without one (its own calls to it then go
    without the key, and an sglang server with a key answers them 401): ``warnings`` keeps each."""

    def __init__(self, api_key=None):
        self.workers = []
        self.metrics = b"sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\n"
        self.api_key = api_key
        self.warnings = []
        self.requests = []  # (method, path) of every request, in order

    def handler(self):
        router = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _send(self, status, body=b"", kind="text/plain"):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                router.requests.append(("GET", self.path))
                if self.path == "/workers":
                    self._send(200, json.dumps({"workers": router.workers}).encode(), "application/json")
                elif self.path == "/metrics":
                    self._send(200, router.metrics)
                else:
                    self._send(404)

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if router.api_key and not body.get("api_key"):
                    router.warnings.append(f"Adding worker {body['url']} without API key while router has API key "
                                           "configured.")
                router.workers.append({"id": f"w{len(router.workers)}", "url": body["url"], "is_healthy": True,
                                       "api_key": body.get("api_key")})
                self._send(202)

            def do_DELETE(self):  # noqa: N802
                wid = self.path.rsplit("/", 1)[1]
                router.workers = [w for w in router.workers if w["id"] != wid]
                self._send(202)

            def log_message(self, *args):
                pass

        return Handler


@pytest.fixture
def router():
    """A router of sglang-router's worker API on loopback."""
    with fake_router() as state:
        yield state


@contextlib.contextmanager
def fake_router(address="127.0.0.1", api_key=None):
    """A FakeRouter listening on address (any of 127.0.0.0/8 is this machine's loopback), at .url."""
    state = FakeRouter(api_key)
    httpd = http.server.ThreadingHTTPServer((address, 0), state.handler())
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state.url = f"http://{address}:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
