#!/usr/bin/env python3
"""Benchmark: the sglang role on a fresh lab host, and uv against pip for the same install.

Prints, for one lab host, in one run:
- the first converge of uv_venv + sglang (clone, venv, resolution and install of the pinned stack);
- a no-op rerun (what every later site.yml run pays);
- the same package set installed into a fresh venv with pip and with uv, both with cold caches,
  and the ratio.
Run it from the repository root: python3 benchmarks/sglang_install.py (it brings the lab up itself
and uses lab host lab-gpu-2, which it removes at the end). Figures, not a pass/fail test.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab import cli, hosts  # noqa: E402

HOST = "lab-gpu-2"


def ssh(cmd):
    return subprocess.run(
        ["ssh", "-q", "-i", str(hosts.ssh_key()), "-p", str(hosts.LAB_HOSTS[HOST]), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "root@127.0.0.1", cmd],
        capture_output=True, text=True, check=True).stdout


def timed_playbook(env, inventory):
    t0 = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), str(REPO / "benchmarks" / "python_stack.yml")],
                          env=env, cwd=str(REPO), capture_output=True, text=True)
    dt = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"playbook failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return dt


REMOTE = r"""
set -e
R=/opt/sglang/current
B=$(mktemp -d -p /var/tmp)  # /tmp may be noexec
export UV_SYSTEM_CERTS=1 UV_NO_PROGRESS=1
# the release's exact package set; the lab's stand-in wheels by direct URL, so that both tools fetch the same files
uv pip freeze --python $R/venv/bin/python --exclude-editable > $B/freeze.txt
python3 - "$B/freeze.txt" > $B/req.txt <<'PY'
import sys, urllib.request, re, html
page = urllib.request.urlopen("http://lab-mirror:8680/simple/").read().decode()
standins = set(re.findall(r'href="([^/"]+)/"', page))
for line in open(sys.argv[1]):
    name, _, ver = line.strip().partition("==")
    norm = re.sub(r"[-_.]+", "-", name).lower()
    if norm in standins:
        idx = urllib.request.urlopen(f"http://lab-mirror:8680/simple/{norm}/").read().decode()
        href = re.search(r'href="\.\./\.\./([^"#]+)', idx).group(1)
        print(f"{name} @ http://lab-mirror:8680/{href}")
    else:
        print(line.strip())
PY
python3 -m venv $B/pip-env
t0=$(date +%s.%N)
$B/pip-env/bin/pip install -q --disable-pip-version-check --no-cache-dir -r $B/req.txt
$B/pip-env/bin/pip install -q --disable-pip-version-check --no-cache-dir --no-deps -e $R/src/python
t1=$(date +%s.%N)
uv venv -q --python /usr/bin/python3 $B/uv-env
t2=$(date +%s.%N)
uv pip install -q --no-cache --python $B/uv-env/bin/python -r $B/req.txt
uv pip install -q --no-cache --python $B/uv-env/bin/python --no-deps -e $R/src/python
t3=$(date +%s.%N)
echo "{\"pip\": $(echo "$t1 - $t0" | bc), \"uv\": $(echo "$t3 - $t2" | bc), \"packages\": $(wc -l < $B/req.txt)}"
rm -rf $B
"""


def main():
    env = cli.up([HOST], fresh=True)
    print(f"sglang role on a fresh lab host ({HOST}):", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        inv = Path(tmp)
        (inv / "hosts.yml").write_text(
            "all:\n  children:\n    gpu_servers:\n      hosts:\n"
            f"        {HOST}:\n          ansible_port: {hosts.LAB_HOSTS[HOST]}\n")
        (inv / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
        # the lab's connection settings, as in inventories/lab/hosts.yml
        (inv / "host_vars").mkdir()
        (inv / "host_vars" / f"{HOST}.yml").write_text(
            "ansible_host: 127.0.0.1\nansible_user: root\nansible_python_interpreter: /usr/bin/python3\n"
            "ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null\n")
        first = timed_playbook(env, inv)
        print(f"  first converge (uv_venv + sglang)      {first:8.1f} s", flush=True)
        noop = timed_playbook(env, inv)
        print(f"  no-op rerun                            {noop:8.1f} s", flush=True)
    ssh("command -v bc >/dev/null || (apt-get update -qq && apt-get install -y -qq bc >/dev/null)")
    tools = json.loads(ssh(REMOTE).strip().splitlines()[-1])
    hosts.remove(HOST)
    print(f"same {tools['packages']} packages into a fresh venv, cold caches:")
    print(f"  pip                                    {tools['pip']:8.1f} s")
    print(f"  uv                                     {tools['uv']:8.1f} s")
    print(f"  pip / uv                               {tools['pip'] / tools['uv']:8.1f} x")


if __name__ == "__main__":
    main()
