"""Load through the router while a fleet changes: ``python3 -m lab.loadgen --url URL [--api-key K]``.

Sends chat completions from a few threads, without pause, until it is stopped (SIGINT or SIGTERM) or
``--seconds`` have passed; then prints one JSON object: requests sent, failed (with the first errors),
and how many each server answered (by the ``system_fingerprint`` the lab's stand-in server sets: host and
release). A request that fails is never retried here: every failure the router let through is counted.
"""
from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


class Load:
    def __init__(self, url: str, api_key: str, model: str, timeout: float):
        self.url = url.rstrip("/") + "/v1/chat/completions"
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.body = json.dumps({"model": model, "max_tokens": 16,
                                "messages": [{"role": "user", "content": "Say hello."}]}).encode()
        self.timeout = timeout
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.sent = 0
        self.failed = 0
        self.errors: list[str] = []
        self.served: collections.Counter = collections.Counter()
        self.latencies: list[float] = []

    def one(self) -> None:
        start = time.monotonic()
        error = None
        fingerprint = None
        try:
            req = urllib.request.Request(self.url, data=self.body, headers=self.headers, method="POST")
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                reply = json.loads(resp.read())
                if not reply.get("choices"):
                    error = f"200 without choices: {str(reply)[:200]}"
                fingerprint = reply.get("system_fingerprint") or "unknown"
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code}: {exc.read()[:200]!r}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        with self.lock:
            self.sent += 1
            self.latencies.append(time.monotonic() - start)
            if error:
                self.failed += 1
                if len(self.errors) < 20:
                    self.errors.append(f"{time.strftime('%H:%M:%S')} {error}")
            else:
                self.served[fingerprint] += 1

    def worker(self) -> None:
        while not self.stop.is_set():
            self.one()

    def report(self, seconds: float) -> dict:
        lat = sorted(self.latencies) or [0.0]
        return {"url": self.url, "seconds": round(seconds, 1), "sent": self.sent, "failed": self.failed,
                "errors": self.errors, "served_by": dict(sorted(self.served.items())),
                "latency_p50_s": round(lat[len(lat) // 2], 3), "latency_max_s": round(lat[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m lab.loadgen", description=__doc__)
    ap.add_argument("--url", required=True, help="the router's base address")
    ap.add_argument("--api-key", default="", help="the servers' API key")
    ap.add_argument("--model", default="glm-5", help="the served model name")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: until a signal)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds one request may take")
    ap.add_argument("--out", help="write the JSON report here too")
    args = ap.parse_args(argv)
    load = Load(args.url, args.api_key, args.model, args.timeout)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: load.stop.set())
    start = time.monotonic()
    threads = [threading.Thread(target=load.worker, daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()
    while not load.stop.is_set():
        if args.seconds and time.monotonic() - start >= args.seconds:
            load.stop.set()
        load.stop.wait(0.2)
    for t in threads:
        t.join(args.timeout + 5)
    report = load.report(time.monotonic() - start)
    text = json.dumps(report, indent=1)
    print(text, flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0 if report["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
