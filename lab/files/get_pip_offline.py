"""Stand-in for pip's get-pip.py bootstrap script, for ansible-test in the lab.

ansible-test downloads get-pip.py from a host these machines cannot reach.
This does the same job from what Python already has: ensurepip installs the
bundled pip, then pip installs what ansible-test asked for (from PyPI). The
venv's pip is told to trust the system's CA bundle, which holds any proxy CA
the host trusts (ansible-test clears PIP_CERT and friends from the environment).
"""
import ensurepip
import os
import subprocess
import sys

BUNDLES = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"]

ensurepip.bootstrap(upgrade=True)
bundle = next((b for b in BUNDLES if os.path.isfile(b)), None)
if bundle:
    with open(os.path.join(sys.prefix, "pip.conf"), "w", encoding="utf-8") as fh:
        fh.write(f"[global]\ncert = {bundle}\n")
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if bundle:
    args = ["--cert", bundle, *args]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
