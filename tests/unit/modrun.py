"""Run one of the collection's modules as Ansible runs it on a host: a fresh interpreter, its arguments as JSON
on stdin, its result as JSON on stdout."""
import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_module(name, args, *, env=None, path_prepend=None):
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(REPO / ".collections"), full.get("PYTHONPATH", "")])
    if path_prepend:
        full["PATH"] = f"{path_prepend}{os.pathsep}{full['PATH']}"
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-m", f"ansible_collections.blackwell.serving.plugins.modules.{name}"],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), capture_output=True, text=True,
                          env=full, timeout=120)
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
