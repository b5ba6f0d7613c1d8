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

``/generate`` (sglang's native endpoint) answers greedily and deterministically
from the model's files: the same files and prompt give the same token ids and
log-probabilities on every host, with the runner-up at each position, shaped as
sglang 0.5.9 answers with ``return_logprob`` and ``top_logprobs_num``. The
release adds noise of a few thousandths of a nat to the log-probabilities, as
another build's kernels do. Told to (``SGLANG_LAB_CORRUPT_FROM_TOKEN=K`` in its
environment, or the file /etc/sglang-lab-standin/corrupt-from-token; a lab-only
setting), it answers other tokens, confidently, from position K on: the server
that starts, answers /health, and computes garbage.

At start it imports sgl-kernel, whose stand-in loads its extension as the real one does: a host without a
library that extension needs (libnuma.so.1, the driver's libcuda.so.1) fails there, naming it.

``--model-loader-extra-config`` is read as sglang 0.5.9 reads it: JSON, and its default loader refuses any key but
``enable_multithread_load`` and ``num_threads`` at start.
"""
import hashlib
import json
import logging
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
# lab-only: from which generated token on the answers are garbage (-1: never); a lab branch sets it in the code
DEFAULT_CORRUPT_FROM = -1
CORRUPT_FILE = "/etc/sglang-lab-standin/corrupt-from-token"
RELEASE = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
FINGERPRINT = f"{socket.gethostname()}:{os.path.realpath(os.path.join(os.path.dirname(__file__), '..', '..'))}"


def model_config(path):
    cfg = os.path.join(path, "config.json")
    if not os.path.isfile(cfg):
        raise SystemExit(f"sglang (lab stand-in): no config.json under model path {path!r}")
    with open(cfg, encoding="utf-8") as fh:
        return json.load(fh)


def model_digest(path):
    """What the weights are: every file of the model's directory (hidden ones aside), names and contents."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode() + b"\0")
            with open(full, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def corrupt_from():
    try:
        with open(CORRUPT_FILE, encoding="utf-8") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return int(os.environ.get("SGLANG_LAB_CORRUPT_FROM_TOKEN", DEFAULT_CORRUPT_FROM))


def _u(*parts):
    """A number in [0, 1) from the parts, the same on every host."""
    return int(hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:12], 16) / float(1 << 48)


def generate(digest, vocab, prompt, max_new_tokens, top_n, bad_from):
    """Greedy tokens for a prompt, as (chosen, tops): per position [logprob, token id, None]."""
    chosen, tops = [], []
    for i in range(max_new_tokens):
        tok = int(_u(digest, prompt, i, "token") * vocab)
        lp = -0.001 - 0.4 * _u(digest, prompt, i, "lp")
        alt = (tok + 1 + int(_u(digest, prompt, i, "alt") * 977)) % vocab
        alt_lp = lp - 0.3 - 3.0 * _u(digest, prompt, i, "gap")
        noise = (_u(RELEASE, prompt, i) - 0.5) * 0.004  # another build, other rounding
        lp, alt_lp = round(lp + noise, 6), round(alt_lp + noise, 6)
        if 0 <= bad_from <= i:
            tok, lp = (tok * 7919 + 104729) % vocab, -0.002
        chosen.append([lp, tok, None])
        tops.append([[lp, tok, None], [alt_lp, alt, None]][:max(top_n, 0)])
    return chosen, tops


class State:
    ready = False
    started = time.time()
    running = 0
    lock = threading.Lock()


def make_handler(args, config, digest):
    served = args.served_model_name or args.model_path
    vocab = int(config.get("vocab_size") or 151552)

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
            if path == "/generate":
                if not State.ready:
                    return self.reply(503, {"error": "server is starting"})
                prompt = body.get("text")
                if not isinstance(prompt, str):
                    return self.reply(400, {"error": "the lab stand-in takes one prompt as text"})
                sp = body.get("sampling_params") or {}
                n = int(sp.get("max_new_tokens", 128))
                chosen, tops = generate(digest, vocab, prompt, n, int(body.get("top_logprobs_num") or 0),
                                        corrupt_from())
                meta = {"id": "lab-" + hashlib.sha256(prompt.encode()).hexdigest()[:8], "completion_tokens": n,
                        "finish_reason": {"type": "length", "length": n}}
                if body.get("return_logprob"):
                    meta["output_token_logprobs"] = chosen
                    if body.get("top_logprobs_num"):
                        meta["output_top_logprobs"] = tops
                return self.reply(200, {"text": " ".join(f"<{c[1]}>" for c in chosen), "meta_info": meta})
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
    # sglang imports sgl-kernel's compiled ops as it starts (the stand-in's are real shared objects with the real
    # DT_NEEDED list: lab/elfstub.py): a host without libnuma1 or the driver's libcuda fails here, as a real one does
    try:
        import sgl_kernel  # noqa: F401
    except ImportError as exc:
        print(f"ImportError: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1)
    missing = jit_toolchain_missing()
    if missing:
        print("RuntimeError: flashinfer JIT compilation cannot run (lab stand-in of the first warm-up): "
              + "; ".join(missing), file=sys.stderr, flush=True)
        raise SystemExit(1)
    # as sglang 0.5.9 does at start (srt/entrypoints/engine.py), every argument with its value, the API key too
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s")
    logging.getLogger("sglang.srt.entrypoints.engine").info(
        "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items())) + ")")
    config = model_config(args.model_path)
    # as sglang 0.5.9 reads it (configs/load_config.py: JSON; model_loader/loader.py DefaultModelLoader: two keys)
    extra = json.loads(args.model_loader_extra_config)
    unexpected = set(extra) - {"enable_multithread_load", "num_threads"}
    if unexpected:
        raise ValueError(f"Unexpected extra config keys for load format auto: {unexpected}")
    delay = float(os.environ.get("SGLANG_LAB_STARTUP_SECONDS", "1"))
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(args, config, model_digest(args.model_path)))
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
