#!/usr/bin/env python3
"""Benchmark: time to serving of a new host, with and without the early start of the weights' download.

site.yml starts the model's download first (in the background, right after the service user and its virtual
environment) and waits for it only before the service; `--skip-tags model_weights_start` leaves that start out,
so the download runs where it ran before, after the driver, CUDA and sglang. Each run starts a fresh lab host
(lab-gpu-4) from the lab's bare image, slows the Hub stand-in to --rate bytes per second (lab/hub.py,
/_lab/rate), runs site.yml on it, and polls the server's /health from the control node: time to serving is
from the start of site.yml to the first healthy answer. The install is real (the real driver packages' stand-ins,
uv, a real sglang release with its ~160 packages from PyPI); the download is the real `hf` CLI against the slowed
Hub stand-in. Figures, not a test. From the repository root: python3 benchmarks/time_to_serving.py [--rate N]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab import cli, engine, hosts, hub, serve  # noqa: E402

HOST = "lab-gpu-4"
API_KEY = "lab-standin-api-key-not-a-secret"


def inventory(directory: Path) -> Path:
    inv = directory / "one-host"
    inv.mkdir()
    (inv / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    (inv / "hosts.yml").write_text(f"""all:
  vars:
    ansible_host: 127.0.0.1
    ansible_user: root
    ansible_python_interpreter: /usr/bin/python3
    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
  children:
    gpu_servers:
      hosts:
        {HOST}:
          ansible_port: {hosts.LAB_HOSTS[HOST]}
""")
    return inv


def hub_call(base: str, path: str) -> dict:
    with urllib.request.urlopen(f"{base}{hub.PREFIX}{path}", timeout=10) as r:
        return json.loads(r.read())


def healthy(url: str) -> bool:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {API_KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def one_run(env: dict, image: str, inv: Path, early: bool, base: str, size: int) -> dict:
    hosts.start(HOST, image, fresh=True)
    address = hosts.address(HOST)
    url = f"http://{address}:30000/health"
    hub_call(base, f"/_lab/reset?clients={address}")
    served = {}
    stop = threading.Event()
    start = time.monotonic()

    def poll():
        while not stop.is_set():
            if healthy(url):
                served["t"] = time.monotonic() - start
                return
            time.sleep(0.5)

    def download():
        # when the Hub stand-in sent this host its first byte, and when the whole revision
        while not stop.is_set():
            sent = hub_call(base, f"/_lab/stats?clients={address}")["sent_total"]
            now = time.monotonic() - start
            if sent and "first" not in served:
                served["first"] = now
            if sent >= size:
                served["last"] = now
                return
            time.sleep(1)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    threading.Thread(target=download, daemon=True).start()
    extra = [] if early else ["--skip-tags", "model_weights_start"]
    proc = subprocess.run(["ansible-playbook", "-i", str(inv), str(REPO / "playbooks" / "site.yml"),
                           "-e", "nvidia_driver_reboot=true", *extra], env=env, cwd=str(REPO),
                          capture_output=True, text=True)
    total = time.monotonic() - start
    stop.set()
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-6000:])
        raise SystemExit(f"site.yml failed ({'early start' if early else 'no early start'})")
    # the wait for the download, as the play reports it (download_progress's last line)
    waited = [ln for ln in proc.stdout.splitlines() if "download: finished after" in ln]
    return {"serving": served.get("t"), "site": total, "waited": waited[-1].split("finished after")[-1].strip()
            if waited else "no wait", "first": served.get("first"), "last": served.get("last")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=192 * 1024,
                    help="the Hub stand-in's rate in bytes per second and connection (default 192 KiB/s: hf opens "
                         "several connections, and the 72 MiB model then takes about as long as the install)")
    args = ap.parse_args()
    with cli.lab_lock():
        env = cli.up()
        env["PATH"] = f"{env['VIRTUAL_ENV']}/bin:{env['PATH']}"
        base = f"http://{engine.bridge_gateway()}:{serve.HTTP_PORT}"
        before = hub_call(base, "/_lab/stats")["bytes_per_s"]
        size = hub_call(base, "/_lab/stats")["one_copy"]
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            inv = inventory(Path(tmp))
            try:
                hub_call(base, f"/_lab/rate?bytes_per_s={args.rate}")
                for early in (False, True):
                    label = "early start (site.yml)" if early else "no early start (--skip-tags model_weights_start)"
                    print(f"fresh {HOST}: {label}", flush=True)
                    r = one_run(env, env["BLACKWELL_LAB_IMAGE"], inv, early, base, size)
                    rows.append((label, r))
                    print(f"  serving after {r['serving']:.0f} s, site.yml {r['site']:.0f} s, "
                          f"waited for the download {r['waited']}; the Hub sent the first byte after "
                          f"{r['first']:.0f} s, the last after {r['last']:.0f} s", flush=True)
            finally:
                hub_call(base, f"/_lab/rate?bytes_per_s={before}")
                hosts.remove(HOST)
    print()
    print(f"time to serving of a fresh lab host; Hub stand-in slowed to {args.rate / 1024:.0f} KiB/s per connection, "
          f"the model {size / 1048576:.0f} MiB")
    print(f"{'site.yml':50}  {'to serving s':>12}  {'site.yml s':>10}  {'download s (from, to)':>22}")
    for label, r in rows:
        print(f"{label:50}  {r['serving']:>12.0f}  {r['site']:>10.0f}  "
              f"{r['last'] - r['first']:>8.0f} ({r['first']:>4.0f}, {r['last']:>4.0f})")
    (no, yes) = (rows[0][1]["serving"], rows[1][1]["serving"])
    # without the early start the download runs after the install: the rest is the time to serving without it
    download = rows[0][1]["last"] - rows[0][1]["first"]
    rest = no - download
    longer = max(download, rest)
    early = rows[1][1]
    print(f"early start saves {no - yes:.0f} s ({100 * (no - yes) / no:.0f}%). Without it: the download {download:.0f} s,"
          f" everything else {rest:.0f} s. With it: {yes:.0f} s to serving, {yes / longer:.2f}x the longer of the two"
          f" ({longer:.0f} s; their sum {no:.0f} s); the download started after {early['first']:.0f} s (the"
          f" preflight, the service user, uv and hf before it) and the service served {yes - early['last']:.0f} s"
          f" after its last byte (the driver's reboot, the service's start and the model's load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
