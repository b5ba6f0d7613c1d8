"""The health probe (plugins/modules/sglang_health.py) against a small HTTP server and a fake systemctl: when is
the unit judged failed."""
import pytest

from modrun import run_module, serve


@pytest.fixture
def server():
    """Answers /health with the status in `state['status']` (503 while the weights load, then 200)."""
    state = {"status": 503}
    with serve(lambda path: (state["status"], b"")) as url:
        yield url, state


def fake_systemctl(tmp_path, active, sub, restarts):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "systemctl"
    script.write_text(f"#!/bin/sh\nprintf 'ActiveState={active}\\nSubState={sub}\\nNRestarts={restarts}\\n'\n")
    script.chmod(0o755)
    return bin_dir


def probe(tmp_path, url, active, sub, restarts, **extra):
    return run_module("sglang_health", {"url": url, "unit": "sglang.service", **extra},
                      path_prepend=fake_systemctl(tmp_path, active, sub, restarts))


def test_a_rolled_back_server_still_loading_is_not_failed(server, tmp_path):
    """Issue 19 (2): the bad unit auto-restarted once before the rollback; NRestarts stays 1 after the
    deliberate restart. The rolled-back server's 503 while it loads is no failure."""
    url, _ = server
    r = probe(tmp_path, url, "active", "running", 1, restarts_at_start=1)
    assert not r.get("failed"), r
    assert r["healthy"] is False and r["status"] == 503
    assert r["unit_failed"] is False, r
    assert r["unit_restarts_since_start"] == 0


def test_a_crash_after_the_deliberate_restart_is_failed(server, tmp_path):
    url, _ = server
    r = probe(tmp_path, url, "active", "running", 2, restarts_at_start=1)
    assert r["unit_failed"] is True and r["unit_restarts_since_start"] == 1


@pytest.mark.parametrize("active,sub", [("failed", "failed"), ("inactive", "dead"), ("activating", "auto-restart")])
def test_a_dead_or_restarting_unit_is_failed(server, tmp_path, active, sub):
    url, _ = server
    assert probe(tmp_path, url, active, sub, 0)["unit_failed"] is True


def test_healthy(server, tmp_path):
    url, state = server
    state["status"] = 200
    r = probe(tmp_path, url, "active", "running", 0)
    assert r["healthy"] is True and r["unit_failed"] is False


def test_another_path_is_asked(tmp_path):
    """An sglang-router is ready at /readiness (once it has a healthy server): the gate asks the path given."""
    asked = []

    def answer(path):
        asked.append(path)
        return (200, b"") if path == "/readiness" else (404, b"")

    with serve(answer) as url:
        r = probe(tmp_path, url, "active", "running", 0, path="/readiness")
    assert r["healthy"] is True and asked == ["/readiness"]
