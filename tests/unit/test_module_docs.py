"""Module documentation as community.postgresql writes it, read the way a user reads it (``ansible-doc``, with the
doc fragments merged): a sample for every returned key, ``seealso``, one doc fragment for the options the HTTP
modules share, and the documented return values equal to what the code returns."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modrun import HANG_BOUND, REPO, router, run_module  # noqa: F401 (router: a fixture)

MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
# the options the modules that talk to an sglang server (or its router) share, written once in a doc fragment
SHARED_FRAGMENT = "blackwell.serving.sglang_api"
SHARED_OPTIONS = ("url", "api_key", "timeout")
HTTP_MODULES = ("sglang_fingerprint", "sglang_health", "sglang_probe", "sglang_router_worker")
# keys every module result carries, documented by Ansible itself
COMMON_KEYS = {"changed", "failed", "msg", "invocation", "warnings", "deprecations"}


def _ansible_doc(names):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    out = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "--json", "-t", "module",
                          *(f"blackwell.serving.{n}" for n in names)],
                         capture_output=True, text=True, env=env, check=True, timeout=HANG_BOUND)
    return {k.rsplit(".", 1)[1]: v for k, v in json.loads(out.stdout).items()}


@pytest.fixture(scope="module")
def docs():
    return _ansible_doc(MODULES)


def _walk(returns, prefix=""):
    for key, spec in (returns or {}).items():
        yield prefix + key, spec
        yield from _walk(spec.get("contains"), prefix + key + ".")


@pytest.mark.parametrize("name", MODULES)
def test_every_returned_key_has_a_sample(docs, name):
    missing = [key for key, spec in _walk(docs[name]["return"]) if "sample" not in spec]
    assert not missing, f"{name}: RETURN keys without a sample: {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_every_module_points_to_related_content(docs, name):
    assert docs[name]["doc"].get("seealso"), f"{name}: no seealso"


@pytest.mark.parametrize("name", HTTP_MODULES)
def test_the_http_options_come_from_one_fragment(docs, name):
    source = (REPO / "plugins" / "modules" / f"{name}.py").read_text()
    own_doc = yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    assert SHARED_FRAGMENT in (own_doc.get("extends_documentation_fragment") or []), name
    own = own_doc["options"]
    for option in SHARED_OPTIONS:
        merged = docs[name]["doc"]["options"].get(option) or {}
        assert merged.get("description") and merged.get("type"), f"{name}: {option} undocumented: {merged}"
    for option in ("url", "api_key"):
        # described once, in the fragment; a module adds only what is its own (required, a default)
        assert set(own.get(option) or {}) <= {"required", "default"}, (
            f"{name}: {option} is described again in the module: {own[option]}")


# --- documented values equal what the code returns: sglang_router_worker against a router of the 0.3 API ---------

def _assert_documented(doc, name, result):
    returns = doc["return"]
    undocumented = sorted(set(result) - COMMON_KEYS - set(returns))
    assert not undocumented, f"{name} returns keys its RETURN does not document: {undocumented}"
    for key, value in result.items():
        choices = returns.get(key, {}).get("choices")
        if choices is not None:
            assert value in choices, f"{name}: {key}={value!r} is not among the documented values {choices}"


def test_router_worker_returns_what_it_documents(docs, router):
    doc = docs["sglang_router_worker"]
    server = router.url  # the same loopback server answers /metrics as the worker
    other = "http://10.9.9.9:30000"
    router.workers = [{"id": "w-other", "url": other, "is_healthy": True}]
    results = [
        run_module("sglang_router_worker", {"router_url": router.url, "url": server, "state": "query"}),
        run_module("sglang_router_worker", {"router_url": router.url, "url": server, "state": "present"}),
        run_module("sglang_router_worker", {"router_url": router.url, "url": server, "state": "absent",
                                            "drain_timeout": 5}),
        run_module("sglang_router_worker", {"router_url": router.url, "url": server, "state": "absent"}),
    ]
    for r in results:
        assert not r.get("failed"), r
        _assert_documented(doc, "sglang_router_worker", r)
    assert results[0]["present"] is False and results[1]["changed"] is True
    assert results[2]["drained_by"] == "metrics", results[2]
    assert results[3]["changed"] is False and "drained_by" not in results[3]
    # a server without sglang's gauges is given its grace time, and says so
    run_module("sglang_router_worker", {"router_url": router.url, "url": server, "state": "present"})
    router.metrics = b"# no gauges\n"
    r = run_module("sglang_router_worker", {"router_url": router.url, "url": server, "state": "absent",
                                            "drain_grace": 0})
    _assert_documented(doc, "sglang_router_worker", r)
    assert r["drained_by"] == "grace", r


def test_probe_returns_what_it_documents(docs, tmp_path):
    import sys
    from modrun import serve
    (tmp_path / "current").symlink_to(tmp_path)
    with serve(lambda path: (200, b"{}")) as url:
        r = run_module("sglang_probe", {"url": url, "paths": ["/health"], "chat": {"model": "m"}, "unit": "x.service",
                                        "links": [str(tmp_path / "current")], "exists": [str(tmp_path)],
                                        "python": sys.executable})
    assert not r.get("failed"), r
    assert {"links", "exists", "packages", "unit_state", "endpoints", "chat"} <= set(r)
    _assert_documented(docs["sglang_probe"], "sglang_probe", r)
