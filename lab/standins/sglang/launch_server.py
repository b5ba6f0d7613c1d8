"""Lab stand-in for ``python -m sglang.launch_server``.

The lab's commit on top of sglang's real tree puts it in place of sglang's
own launch_server.py. It takes sglang's command line with the lab's stand-in
parser (sglang/lab_standin/server_args.py: exact names only, an unknown
option is an error, ``--config`` merged as sglang does), checks the model
directory, and answers the server's HTTP endpoints. It loads no model and
needs no GPU: a chat completion returns a short fixed text so that callers can
check the plumbing, not the model.

At start it looks up what flashinfer 0.6.3's JIT compiler needs on a real
host during the first warm-up (flashinfer/jit/cpp_ext.py): ``ninja`` by bare
name on PATH, nvcc at ``$CUDA_HOME/bin/nvcc`` (CUDA_HOME, else CUDA_PATH, else
the directory above ``nvcc`` on PATH, else /usr/local/cuda), and the host C++
compiler (``$CXX``, else ``c++`` on PATH). Where one is missing it fails, as
the real server's warm-up does, so that the health gate sees it.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sglang.lab_standin.server_args import prepare_server_args
from sglang.version import __version__


RESPONSE_SECONDS = float(os.environ.get("SGLANG_LAB_RESPONSE_SECONDS", "0"))
FINGERPRINT = f"{socket.gethostname()}:{os.path.realpath(os.path.join(os.path.dirname(__file__), '..', '..'))}"


def model_config(path):
    cfg = os.path.join(path, "config.json")
    if not os.path.isfile(cfg):
        raise SystemExit(f"sglang (lab stand-in): no config.json under model path {path!r}")
    with open(cfg, encoding="utf-8") as fh:
        return json.load(fh)


class State:
    ready = False
    started = time.time()
    running = 0
    lock = threading.Lock()


def make_handler(args, config):
    served = args.served_model_name or args.model_path

    class Handler(BaseHTTPRequestHandler):
        server_version = f"sglang-lab-standin/{__version__}"

        def log_message(self, fmt, *a):
            sys.stderr.write("[http] " + fmt % a + "\n")

        def reply(self, code, body, ctype="application/json"):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorised(self):
            if not args.api_key:
                return True
            if self.headers.get("Authorization") == f"Bearer {args.api_key}":
                return True
            self.reply(401, {"error": "unauthorized"})
            return False

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/health_generate"):
                return self.reply(200 if State.ready else 503, b"", "text/plain")
            if not self.authorised():
                return None
            if path == "/v1/models":
                return self.reply(200, {"object": "list", "data": [
                    {"id": served, "object": "model", "owned_by": "sglang", "root": served,
                     "max_model_len": config.get("max_position_embeddings", 4096)}]})
            if path in ("/get_model_info", "/model_info"):
                return self.reply(200, {"model_path": args.model_path, "tokenizer_path": args.model_path,
                                        "is_generation": True,
                                        "model_type": config.get("model_type"),
                                        "architectures": config.get("architectures")})
            if path in ("/get_server_info", "/server_info"):
                info = dict(vars(args))
                info.pop("api_key", None)
                info.pop("config", None)
                info["version"] = __version__
                info["lab_standin"] = True
                return self.reply(200, info)
            if path == "/metrics" and args.enable_metrics:
                # the gauges real sglang exports (a router drain waits for them to reach 0)
                text = (f"sglang:num_running_reqs {State.running}\n"
                        "sglang:num_queue_reqs 0\n")
                return self.reply(200, text.encode(), "text/plain; version=0.0.4")
            return self.reply(404, {"error": f"not found: {path}"})

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            if not self.authorised():
                return None
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self.reply(400, {"error": "invalid JSON"})
            if path == "/v1/chat/completions":
                if not State.ready:
                    return self.reply(503, {"error": "server is starting"})
                with State.lock:
                    State.running += 1
                try:
                    # a request takes a while, as generation does (SGLANG_LAB_RESPONSE_SECONDS)
                    time.sleep(RESPONSE_SECONDS)
                finally:
                    with State.lock:
                        State.running -= 1
                text = "Hello from the lab stand-in of sglang."
                return self.reply(200, {
                    "id": "chatcmpl-lab", "object": "chat.completion", "created": int(time.time()),
                    "model": served,
                    # which host and release answered: the lab's load script counts them
                    "system_fingerprint": FINGERPRINT,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": len(json.dumps(body.get("messages", []))) // 4,
                              "completion_tokens": 9, "total_tokens": 9}})
            return self.reply(404, {"error": f"not found: {path}"})

    return Handler


def cuda_home():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc")
    return os.path.dirname(os.path.dirname(nvcc)) if nvcc else "/usr/local/cuda"


def jit_toolchain_missing():
    """What flashinfer's JIT would not find, as it looks (an empty list: all there)."""
    path = os.environ.get("PATH", "")
    missing = []
    if not shutil.which("ninja"):
        missing.append(f"ninja is not on PATH ({path})")
    nvcc = os.path.join(cuda_home(), "bin", "nvcc")
    try:
        subprocess.run([nvcc, "--version"], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        missing.append(f"nvcc at {nvcc} does not run ({exc})")
    cxx = os.environ.get("CXX", "c++")
    if not shutil.which(cxx):
        missing.append(f"no host C++ compiler {cxx!r} on PATH ({path})")
    return missing


def main(argv=None):
    args = prepare_server_args(sys.argv[1:] if argv is None else argv)
    missing = jit_toolchain_missing()
    if missing:
        print("RuntimeError: flashinfer JIT compilation cannot run (lab stand-in of the first warm-up): "
              + "; ".join(missing), file=sys.stderr, flush=True)
        raise SystemExit(1)
    config = model_config(args.model_path)
    delay = float(os.environ.get("SGLANG_LAB_STARTUP_SECONDS", "1"))
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(args, config))
    print(f"sglang {__version__} (lab stand-in) serving {args.model_path} as "
          f"{args.served_model_name or args.model_path} on {args.host}:{args.port}, tp_size={args.tp_size}",
          flush=True)

    def ready_later():
        time.sleep(delay)
        State.ready = True
        print("The server is fired up and ready to roll!", flush=True)

    threading.Thread(target=ready_later, daemon=True).start()
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
