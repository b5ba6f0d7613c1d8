"""Which index each package of the lab's sglang release came from, proven from the installation's own records.

uv records no index in an installed distribution (INSTALLER says "uv"; direct_url.json exists only for URL,
path and editable installs). What it does record is RECORD: the sha256 of every installed file, the wheel's
METADATA included. An index serves each wheel's METADATA beside it (``<wheel>.metadata``, PEP 658: PyPI, the
PyTorch index and the lab's stand-in of it; where a mirror does not, the wheel's own copy is read). So a package came from the index that lists, at the installed
version, a wheel whose METADATA has the installed METADATA's hash; the test asks every index the host was given
and sglang's own pyproject names (pypi.org for torch), and wants exactly the configured one.
"""
import hashlib
import json
import os
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import yaml

from helpers import REPO
from lab import hosts, wheels

LAB = yaml.safe_load((REPO / "inventories/lab/group_vars/all/stack.yml").read_text())
VENV_PYTHON = "/opt/sglang/current/venv/bin/python"

# what the installed METADATA of each distribution hashes to, read on the host from RECORD
READ_RECORDS = r'''
import base64, importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    dist = md.distribution(name)
    for line in dist.read_text("RECORD").splitlines():
        path, digest, _ = line.rsplit(",", 2)
        if path.endswith(".dist-info/METADATA"):
            algo, b64 = digest.split("=", 1)
            out[name] = {"version": dist.version, "installer": (dist.read_text("INSTALLER") or "").strip(),
                         "direct_url": dist.read_text("direct_url.json") is not None,
                         algo: base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()}
print(json.dumps(out))
'''


def reachable_url(url):
    """The lab's inventory names the stand-in index lab-mirror (the hosts' name for the docker bridge)."""
    return url.replace("lab-mirror", os.environ.get("BLACKWELL_LAB_GATEWAY", "lab-mirror"))


def metadata_hashes(index, dist, version):
    """sha256 of the METADATA of every wheel the index lists for dist at version."""
    page_url = f"{reachable_url(index).rstrip('/')}/{wheels.normalise(dist)}/"
    try:
        with urllib.request.urlopen(page_url, timeout=60) as resp:
            links = wheels.hrefs(resp.read().decode())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return set()
        raise
    found = set()
    stem = re.sub(r"[-_.]+", "_", dist).lower()
    for href in links:
        url = urllib.parse.urljoin(page_url, href.split("#", 1)[0])
        name = url.rsplit("/", 1)[1]
        parts = name.split("-")
        if not name.endswith(".whl") or parts[0].lower() != stem or parts[1] != version:
            continue
        found.add(hashlib.sha256(wheel_metadata(url)).hexdigest())
    return found


def wheel_metadata(url):
    """The METADATA of the wheel at url: <url>.metadata where the index serves it, else from the wheel itself."""
    try:
        with urllib.request.urlopen(url + ".metadata", timeout=60) as resp:
            return resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    with urllib.request.urlopen(url, timeout=300) as resp:
        return wheels.wheel_metadata(resp.read())


# (distribution, version, the stack file's variable naming the index it must come from)
EXPECTED = [
    ("torch", "2.9.1+cu129", "sglang_torch_index_url"),
    ("flashinfer-cubin", LAB["sglang_flashinfer_version"], "sglang_torch_index_url"),
    ("flashinfer-python", LAB["sglang_flashinfer_version"], "sglang_package_index_url"),
    ("transformers", LAB["sglang_transformers_version"], "sglang_package_index_url"),
]


def check(host, dist, version, index_var):
    out = subprocess.run(["docker", "exec", hosts.container(host), VENV_PYTHON, "-c", READ_RECORDS, dist],
                         capture_output=True, text=True, check=True)
    record = json.loads(out.stdout)[dist]
    assert record["version"] == version and record["installer"] == "uv" and not record["direct_url"], record
    # every index in play: the two the stack file configures, and the one sglang's pyproject names for torch
    candidates = [LAB["sglang_torch_index_url"], LAB["sglang_package_index_url"], "https://pypi.org/simple"]
    matches = {index for index in dict.fromkeys(candidates)
               if record["sha256"] in metadata_hashes(index, dist, version)}
    assert matches == {LAB[index_var]}, f"{dist} {version}: METADATA found on {matches or 'no index'}"
