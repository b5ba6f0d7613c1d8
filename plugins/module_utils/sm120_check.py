# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The SM120 judgement of an sglang tree as M(blackwell.serving.sglang_sm120_check) makes it, for that module and for
verify's one probe (M(blackwell.serving.sglang_probe) with its sm120 option): the estimate of module_utils/sm120.py,
the compiler's verdict with the release's own Triton (module_utils/sm120_probe.py, cached beside the release), and
the fix commit's ancestry. MODULE is an AnsibleModule (run_command, tmpdir, check_mode, warn); P the options as SPEC
describes. Input the judgement cannot take raises ValueError, with the message for the user."""
from __future__ import annotations

import glob
import inspect
import json
import os
import shutil

from ansible_collections.blackwell.serving.plugins.module_utils import sm120
from ansible_collections.blackwell.serving.plugins.module_utils import sm120_probe


# the options, as sglang_sm120_check's argument spec and as what sglang_probe's sm120 option is validated against
SPEC = dict(
    path=dict(type="path", required=True),
    python=dict(type="path"),
    model_path=dict(type="path"),
    capability=dict(type="str", default="12.0"),
    head_sizes=dict(type="list", elements="str", default=["128", "256"]),
    smem_limit=dict(type="int"),
    cache=dict(type="path"),
    fix_commit=dict(type="str", default=sm120.FIX_COMMIT),
    accept_estimate=dict(type="bool", default=False),
)


def git_facts(module, path, fix_commit):
    git = shutil.which("git")
    if git is None:
        return None, None
    # read-only: trust the checkout whoever owns it (a service user's tree, read by root)
    git = [git, "-c", "safe.directory=*"]
    rc, out, err = module.run_command(git + ["-C", path, "rev-parse", "--show-toplevel"])
    if rc != 0:
        return None, None
    top = out.strip()
    rc, head, err = module.run_command(git + ["-C", top, "rev-parse", "HEAD"])
    head = head.strip() if rc == 0 else None
    rc = module.run_command(git + ["-C", top, "merge-base", "--is-ancestor", fix_commit, "HEAD"])[0]
    # 0: ancestor, 1: not an ancestor, other: git cannot tell (e.g. the commit is unknown to a shallow clone)
    return {0: True, 1: False}.get(rc), head


def read_model_config(model_path):
    config = os.path.join(model_path, "config.json")
    try:
        with open(config, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the model's config {config} for its head dims ({exc}); "
                         "give the model's directory as model_path, or leave model_path out") from None


class Probe:
    """Runs the compiler judge (module_utils/sm120_probe.py) with the release's interpreter."""

    def __init__(self, module, python):
        self.module = module
        self.python = python
        self.source = inspect.getsource(sm120_probe)
        self.dir = os.path.join(module.tmpdir, "sm120")
        os.makedirs(self.dir, exist_ok=True)
        self.script = os.path.join(self.dir, "sm120_probe.py")
        with open(self.script, "w", encoding="utf-8") as fh:
            fh.write(self.source)

    def _run(self, arg):
        # Triton's cache in the module's own temporary directory: nothing is left on the host
        env = {"TRITON_CACHE_DIR": os.path.join(self.dir, "triton-cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        rc, out, err = self.module.run_command([self.python, "-I", self.script, arg], environ_update=env)
        if rc != 0:
            return {"status": "failed", "error": f"{self.python} exited {rc}: {(err or out).strip()[-1500:]}"}
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"status": "failed", "error": f"the probe printed no verdict: {(out + err).strip()[-1500:]}"}

    def triton_version(self):
        # A virtual environment's own Triton is the one its interpreter finds first: its metadata answers without
        # starting the interpreter (on a converged host the verdict then comes from the cache with no process).
        # Anything else (no venv, no Triton or two of them in it) is asked of the interpreter itself.
        found = venv_distribution_version(self.python, "triton")
        return found if found else self._run("--triton-version").get("triton")

    def judge(self, file, capability, head_dims):
        return self._run(json.dumps({"file": file, "capability": list(capability), "head_dims": head_dims}))


def venv_distribution_version(python, name):
    """The version in the METADATA of the one installed distribution NAME of the virtual environment PYTHON
    belongs to (its prefix holds pyvenv.cfg), or None where there is not exactly one."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if not os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        return None
    found = []
    for sp in glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")):
        for dist in glob.glob(os.path.join(sp, "*.dist-info")):
            dist_name = os.path.basename(dist)[:-len(".dist-info")].rsplit("-", 1)[0]
            if dist_name.replace("-", "_").lower() == name.replace("-", "_").lower():
                found.append(dist)
    if len(found) != 1:
        return None
    try:
        with open(os.path.join(found[0], "METADATA"), encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
                if not line.strip():
                    break
    except OSError:
        return None
    return None


def read_cache(path, key):
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data.get("verdict") if isinstance(data, dict) and data.get("key") == key else None


def write_cache(path, key, verdict):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"key": key, "verdict": verdict}, fh, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def by_compiler(module, python, estimate, capability, head_dims, smem_limit, cache):
    """(verdict, None) from the compiler, or (None, why not)."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return None, f"{python} is not an executable interpreter"
    probe = Probe(module, python)
    triton = probe.triton_version()
    if not triton:
        return None, f"no Triton: the environment of {python} has no triton package"
    files = [d["file"] for d in estimate["definitions"]]
    key = sm120.cache_key(files, triton, head_dims, capability, smem_limit, probe.source)
    if cache:
        cached = read_cache(cache, key)
        if cached is not None:
            return dict(cached, cached=True), None
    answers = [(d["file"], d["line"], probe.judge(d["file"], capability, head_dims)) for d in estimate["definitions"]]
    verdict, why_not = sm120.judge_compiled(answers, capability, smem_limit)
    if verdict is None:
        return None, why_not
    verdict["triton"] = triton
    if cache and not module.check_mode:
        try:
            write_cache(cache, key, verdict)
        except OSError as exc:
            module.warn(f"could not write the SM120 verdict cache {cache}: {exc}")
    return dict(verdict, cached=False), None


def check(module, p):
    """The verdict sglang_sm120_check returns."""
    try:
        capability = tuple(int(x) for x in p["capability"].split("."))
        if len(capability) != 2:
            raise ValueError
    except ValueError:
        raise ValueError(f"capability must be major.minor, like 12.0; got {p['capability']!r}") from None
    if not os.path.isdir(p["path"]):
        raise ValueError(f"{p['path']} is not a directory; path must be an sglang checkout or its python/ directory")
    config = read_model_config(p["model_path"]) if p["model_path"] else None
    head_dims = sm120.head_dims_for(p["head_sizes"], config)
    limit = sm120.limit_for(capability, p["smem_limit"])
    estimate = sm120.judge_tree(p["path"], capability, head_dims, limit)
    verdict = dict(estimate, triton=None, cached=False)
    if p["python"] and estimate.get("definitions"):
        compiled, why_not = by_compiler(module, p["python"], estimate, capability, head_dims, limit, p["cache"])
        if compiled is not None:
            verdict = compiled
        elif p["accept_estimate"]:
            verdict["compiler_error"] = why_not
            verdict["reason"] = (f"{verdict['reason']} (the estimate's verdict, accepted: the compiler could not "
                                 f"judge: {why_not})")
        else:
            # never a pass: a tree the compiler was asked to judge and could not is not judged
            verdict.update(present=False, judged=False, judge="none", tiles=[], compiler_error=why_not,
                           reason=f"not judged by the compiler: {why_not}")
    verdict["estimate"] = {k: estimate.get(k) for k in ("present", "tiles", "reason", "not_judged")}
    verdict["head_dims"] = [sm120.head_dim_name(d) for d in head_dims]
    ancestor, head = git_facts(module, p["path"], p["fix_commit"])
    verdict.update(fix_commit_ancestor=ancestor, head=head)
    return verdict
