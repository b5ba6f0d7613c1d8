"""sglang_probe (plugins/modules/sglang_probe.py): what verify reads of a release, its unit and its server, in one
call, in the shape the judge reads: against a small HTTP server, a fake systemctl and real links."""
import contextlib
import http.server
import json
import socket
import sys
import threading

import pytest

from modrun import run_module

KEY = "sk-probe-secret"
CHAT = {"model": "glm-5", "messages": [{"role": "user", "content": "capital of France?"}], "max_tokens": 64,
        "temperature": 0}


@contextlib.contextmanager
def server(statuses, chat_answer):
    """GET answers statuses[path]; POST /v1/chat/completions answers chat_answer; both need the bearer key."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, status, body=b""):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            seen.append(("GET", self.path, self.headers.get("Authorization")))
            self._send(statuses.get(self.path, 404) if self.headers.get("Authorization") == f"Bearer {KEY}" else 401)

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(("POST", self.path, self.headers.get("Authorization"), body))
            status, answer = chat_answer
            self._send(status, json.dumps(answer).encode())

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_endpoints_and_chat_in_one_call_with_the_key():
    answer = {"choices": [{"message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}]}
    with server({"/health": 200, "/v1/models": 200, "/get_model_info": 503}, (200, answer)) as (url, seen):
        r = run_module("sglang_probe", {"url": url, "api_key": KEY, "chat": CHAT,
                                        "paths": ["/health", "/v1/models", "/get_model_info"]})
    assert not r.get("failed"), r
    assert r["endpoints"] == {"/health": 200, "/v1/models": 200, "/get_model_info": 503}
    assert r["chat"] == {"status": 200, "content": "Paris.", "finish_reason": "stop"}
    assert seen[-1] == ("POST", "/v1/chat/completions", f"Bearer {KEY}", CHAT)
    assert KEY not in json.dumps(r), "the API key is in the result"


def test_a_wrong_key_and_a_failed_chat_are_found_not_raised():
    with server({"/health": 200}, (500, {"error": "CUDA error"})) as (url, _):
        r = run_module("sglang_probe", {"url": url, "api_key": "wrong", "paths": ["/health"], "chat": CHAT})
    assert r["endpoints"] == {"/health": 401}
    assert r["chat"] == {"status": 500, "content": None, "finish_reason": None}


def test_no_server_answers_minus_one_as_uri_says():
    url = f"http://127.0.0.1:{free_port()}"
    r = run_module("sglang_probe", {"url": url, "paths": ["/health"], "chat": CHAT, "timeout": 5, "chat_timeout": 5})
    assert not r.get("failed"), r
    assert r["endpoints"] == {"/health": -1}
    assert r["chat"] == {"status": -1, "content": None, "finish_reason": None}


def test_nothing_asked_without_a_url():
    r = run_module("sglang_probe", {"paths": ["/health"], "chat": CHAT})
    assert r["endpoints"] == {} and "chat" not in r and "unit_state" not in r and "packages" not in r


def test_links_resolve_as_stat_lnk_source_and_exists_does_not_follow(tmp_path):
    release = tmp_path / "releases" / "abc"
    release.mkdir(parents=True)
    (tmp_path / "current").symlink_to(release)
    (tmp_path / "rel").symlink_to("releases/abc")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "plain").mkdir()
    r = run_module("sglang_probe", {
        "links": [str(tmp_path / n) for n in ("current", "rel", "plain", "missing")],
        "exists": [str(tmp_path / n) for n in ("current", "dangling", "missing")]})
    assert r["links"] == {str(tmp_path / "current"): str(release), str(tmp_path / "rel"): str(release),
                          str(tmp_path / "plain"): None, str(tmp_path / "missing"): None}
    assert r["exists"] == {str(tmp_path / "current"): True, str(tmp_path / "dangling"): True,
                           str(tmp_path / "missing"): False}


def test_packages_of_an_environment_and_of_none(tmp_path):
    r = run_module("sglang_probe", {"python": sys.executable})
    assert r["packages"].get("pytest") == pytest.__version__
    assert all(name == name.lower() and "_" not in name for name in r["packages"])
    assert run_module("sglang_probe", {"python": str(tmp_path / "venv/bin/python")})["packages"] == {}
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho not json\n")
    broken.chmod(0o755)
    assert run_module("sglang_probe", {"python": str(broken)})["packages"] == {}


@pytest.mark.parametrize("out,rc,expect", [("ActiveState=active\n", 0, "active"),
                                           ("ActiveState=inactive\n", 0, "inactive"),
                                           ("", 1, None)])
def test_unit_state(tmp_path, out, rc, expect):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\nprintf '{out}'\nexit {rc}\n")
    (bin_dir / "systemctl").chmod(0o755)
    r = run_module("sglang_probe", {"unit": "sglang.service"}, path_prepend=str(bin_dir))
    assert r["unit_state"] == expect


def generate_answer(n):
    chosen = [[-0.1, 500 + i, None] for i in range(n)]
    tops = [[[-0.1, 500 + i, None], [-3.0, 900 + i, None]] for i in range(n)]
    return {"text": "...", "meta_info": {"output_token_logprobs": chosen, "output_top_logprobs": tops}}


def test_fingerprint_in_the_same_call_equals_sglang_fingerprints():
    """The probe's fingerprint is the one sglang_fingerprint takes of the same server (the same requests)."""
    with server({}, (200, generate_answer(4))) as (url, seen):
        args = {"url": url, "api_key": KEY, "prompts": ["a", "b"], "max_new_tokens": 4, "seed": 7}
        alone = run_module("sglang_fingerprint", args)
        n = len(seen)
        r = run_module("sglang_probe", {"url": url, "api_key": KEY,
                                        "fingerprint": {"prompts": ["a", "b"], "max_new_tokens": 4, "seed": 7}})
    assert not alone.get("failed") and not r.get("failed"), (alone, r)
    assert r["fingerprint"]["fingerprint"] == alone["fingerprint"]
    assert r["fingerprint"]["requests"] == alone["requests"] == 2
    assert seen[n:] == seen[:n] and all(s[1] == "/generate" and s[2] == f"Bearer {KEY}" for s in seen)


def test_a_fingerprint_without_an_answer_is_a_message_with_the_same_words():
    url = f"http://127.0.0.1:{free_port()}"
    args = {"url": url, "prompts": ["a"], "max_new_tokens": 2, "timeout": 5}
    alone = run_module("sglang_fingerprint", args)
    r = run_module("sglang_probe", {"url": url, "fingerprint": {"prompts": ["a"], "max_new_tokens": 2, "timeout": 5}})
    assert alone["failed"] and not r.get("failed")
    assert r["fingerprint"] == {"msg": alone["msg"], "requests": 1, "seconds": r["fingerprint"]["seconds"]}


def test_one_tls_context_serves_every_request_of_a_run(monkeypatch):
    """open_url loads the certificate store for each request (about 50 ms each); the probe's ten requests share one."""
    from ansible_collections.blackwell.serving.plugins.module_utils import http_session as session_http
    made = []
    real = session_http.make_context
    monkeypatch.setattr(session_http, "make_context", lambda: made.append(1) or real())
    answer = {"choices": [{"message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}]}
    with server({"/health": 200}, (200, answer)) as (url, seen):
        s = session_http.Session()
        codes = [s.open_url(url + "/health", headers={"Authorization": f"Bearer {KEY}"}).getcode() for _ in range(3)]
        chat = json.loads(s.open_url(url + "/v1/chat/completions", data=json.dumps(CHAT),
                                     headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
                                     http_agent="test").read())
    assert codes == [200, 200, 200] and chat == answer
    assert seen[-1] == ("POST", "/v1/chat/completions", f"Bearer {KEY}", CHAT)
    assert made == [1]


def test_the_unit_is_read_with_its_drop_ins_as_systemctl_cat_prints_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(
        '#!/bin/sh\ncase "$1" in\n'
        '  show) echo ActiveState=active ;;\n'
        '  cat) printf "# /etc/systemd/system/sglang.service\\n[Service]\\nExecStart=/bin/true --a 1\\n\\n'
        '# /etc/systemd/system/sglang.service.d/override.conf\\n[Service]\\nEnvironment=X=1\\n" ;;\n'
        'esac\n')
    (bin_dir / "systemctl").chmod(0o755)
    r = run_module("sglang_probe", {"unit": "sglang.service"}, path_prepend=str(bin_dir))
    assert r["unit_state"] == "active"
    assert "override.conf" in r["unit_text"] and "Environment=X=1" in r["unit_text"]
    (bin_dir / "systemctl").write_text("#!/bin/sh\nexit 1\n")
    r = run_module("sglang_probe", {"unit": "sglang.service"}, path_prepend=str(bin_dir))
    assert r["unit_state"] is None and r["unit_text"] is None


def _no_gpu(tmp_path):
    return {"nvidia_smi": str(tmp_path / "no-smi"), "proc_version_path": str(tmp_path / "no-proc"),
            "sysfs_pci_path": str(tmp_path / "no-pci"), "kernel_modules": True,
            "kernel_modules_root": str(tmp_path / "modules"), "nvcc": str(tmp_path / "no-nvcc")}


def test_the_gpu_part_answers_as_gpu_facts_does_and_sets_its_fact(tmp_path):
    """verify's GPU read rides in the probe's round trip: the same answer as gpu_facts with the same options."""
    alone = run_module("gpu_facts", _no_gpu(tmp_path))
    got = run_module("sglang_probe", {"gpu": _no_gpu(tmp_path)})
    assert got["ansible_facts"] == alone["ansible_facts"]
    assert got["ansible_facts"]["nvidia_gpu"]["state"] == "no_nvidia_smi"
    assert got["gpu"] == {k: alone[k] for k in ("kernel", "kernel_module_files", "nvcc")}
    assert "gpu" not in run_module("sglang_probe", {}) and "ansible_facts" not in run_module("sglang_probe", {})


def test_a_wrong_gpu_or_sm120_option_fails_naming_it(tmp_path):
    bad = run_module("sglang_probe", {"gpu": {"kernel_modules": "perhaps"}})
    assert bad.get("failed") and bad["msg"].startswith("gpu: ") and "kernel_modules" in bad["msg"]
    unknown = run_module("sglang_probe", {"sm120": {"path": str(tmp_path), "cach": "/x"}})
    assert unknown.get("failed") and unknown["msg"].startswith("sm120: ") and "cach" in unknown["msg"]


def test_the_sm120_part_judges_as_sglang_sm120_check_does_and_never_fails(tmp_path):
    from lab import sglang_repo as lab
    tree = tmp_path / "src"
    (tree / lab.OLD_PATH).parent.mkdir(parents=True)
    (tree / lab.OLD_PATH).write_text(lab.FIXED)
    opts = {"path": str(tree), "head_sizes": ["128", "256"]}
    alone = run_module("sglang_sm120_check", opts)
    got = run_module("sglang_probe", {"sm120": opts})["sm120"]
    assert got["present"] is True and got == {k: v for k, v in alone.items() if k not in ("changed", "invocation")}
    # the model's head sizes where its config.json is, the defaults where it is not (verify names the model anyway)
    model = tmp_path / "model"
    model.mkdir()
    assert run_module("sglang_probe", {"sm120": dict(opts, model_path=str(model))})["sm120"]["present"] is True
    (model / "config.json").write_text("not json")
    broken = run_module("sglang_probe", {"sm120": dict(opts, model_path=str(model))})
    assert not broken.get("failed") and "cannot read the model's config" in broken["sm120"]["error"]
    assert run_module("sglang_sm120_check", dict(opts, model_path=str(model))).get("failed")
    # no tree: nothing to judge (the judge says no release is in service)
    assert run_module("sglang_probe", {"sm120": {"path": str(tmp_path / "none")}})["sm120"] == {}
    assert run_module("sglang_probe", {"sm120": dict(opts, capability="12")})["sm120"]["error"].startswith(
        "capability must be major.minor")
