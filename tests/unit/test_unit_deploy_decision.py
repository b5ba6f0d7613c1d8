"""unit_deploy decides to restart from the host's state: the note started.yml writes after a restart and the
decision deploy.yml makes read the same things the same way (vars/main.yml's __unit_deploy_installed), so a service
started on what is installed, and recorded as having passed the gate, is not restarted; a moved release or input link,
a changed environment file or a new repairs file is a reason, each said. A change that passes the health gate is
recorded; one that fails it is rolled back to the record, restarted and gated again where it passed, and the run fails
saying ROLLED BACK. Run through ansible-playbook against a temp dir, with a stand-in systemctl (the unit enabled,
loaded and active; what it was asked is logged) and a stand-in health endpoint, healthy while the environment file
says so. The lab runs the same against systemd and the stand-in server (tests/integration/test_site_lab_faults.py)."""
import hashlib
import http.server
import json
import os
import shutil
import threading

import pytest

from conftest import run_local_playbook

PLAYBOOK = """
- name: unit_deploy against a temp dir
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The entry point
      ansible.builtin.include_role:
        name: blackwell.serving.unit_deploy
        tasks_from: "{{ entry }}"
      vars:
        unit_deploy_unit: blackwell-test.service
        unit_deploy_unit_path: "{{ root }}/etc/blackwell-test.service"
        unit_deploy_env_path: "{{ root }}/etc/blackwell-test.yaml"
        unit_deploy_record_dir: "{{ root }}/deployed"
        unit_deploy_release_link: "{{ root }}/current"
        unit_deploy_input_links: ["{{ root }}/model"]
        unit_deploy_input_stamps: ["{{ root }}/model/.repairs.json"]
        unit_deploy_unit_changed: "{{ unit_changed | default(false) }}"
        unit_deploy_health_url: "{{ url | default('http://127.0.0.1:9') }}"
        unit_deploy_health_timeout: 1
        unit_deploy_health_interval: 1
    - name: Keep the decision
      ansible.builtin.copy:
        content: "{{ __unit_deploy_reasons | default(none) | to_json }}"
        dest: "{{ root }}/reasons.json"
        mode: "0644"
      check_mode: false
      diff: false
"""

SYSTEMCTL = """#!/bin/sh
# stand-in: the unit is loaded as on disk and active, enabled unless STUB_UNIT_FILE_STATE says otherwise; every call
# is logged
echo "$*" >> "$(dirname "$0")/systemctl.log"
state=${STUB_UNIT_FILE_STATE:-enabled}
case "$*" in
  *--value*) echo 0 ;;
  show*) printf 'Id=blackwell-test.service\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\n'
         printf 'UnitFileState=%s\\nNeedDaemonReload=no\\nNRestarts=0\\n' "$state" ;;
  is-enabled*) echo "$state"; [ "$state" = enabled ] ;;
esac
"""


def host(tmp_path):
    """A host that runs release a and model revision r1, everything recorded as having passed the gate."""
    root = tmp_path / "root"
    for d in ("etc", "deployed", "releases/a", "releases/b", "revs/r1", "revs/r2"):
        (root / d).mkdir(parents=True)
    (root / "etc" / "blackwell-test.service").write_text("[Service]\nExecStart=/bin/true\n")
    (root / "etc" / "blackwell-test.yaml").write_text("port: 1\n")
    os.symlink(root / "releases" / "a", root / "current")
    os.symlink(root / "revs" / "r1", root / "model")
    for name in ("blackwell-test.service", "blackwell-test.yaml"):
        shutil.copy(root / "etc" / name, root / "deployed" / name)
    os.symlink(root / "releases" / "a", root / "deployed" / "release")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    (bin_dir / "journalctl").write_text("#!/bin/sh\necho the stand-in server refused its settings\n")
    (bin_dir / "journalctl").chmod(0o755)
    return root


def run(tmp_path, entry, *flags, ok=True, **params):
    root = tmp_path / "root"
    (root / "reasons.json").unlink(missing_ok=True)
    proc = run_local_playbook(tmp_path, PLAYBOOK, {"root": str(root), "entry": entry, **params}, flags=flags,
                              env={"ANSIBLE_NOCOLOR": "1", "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"},
                              must_pass=False)
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads((root / "reasons.json").read_text()) if ok else None


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_note_of_a_start_is_what_the_decision_compares(tmp_path):
    root = host(tmp_path)
    run(tmp_path, "started")
    note = json.loads((root / "deployed" / "started.json").read_text())
    assert note == {"unit": sha256(root / "etc" / "blackwell-test.service"),
                    "env": sha256(root / "etc" / "blackwell-test.yaml"),
                    "release": str(root / "releases" / "a"),
                    "links": {str(root / "model"): str(root / "revs" / "r1")},
                    "stamps": {str(root / "model" / ".repairs.json"): ""}}

    # started on what is installed and recorded: nothing to restart, and check mode says none would
    proc, reasons = run(tmp_path, "main", "--check", "--diff")
    assert reasons == [] and "would restart" not in proc.stdout

    # a new release, another model revision, another environment file, a repair: each is a reason, said
    os.unlink(root / "current")
    os.symlink(root / "releases" / "b", root / "current")
    os.unlink(root / "model")
    os.symlink(root / "revs" / "r2", root / "model")
    (root / "etc" / "blackwell-test.yaml").write_text("port: 2\n")
    (root / "revs" / "r2" / ".repairs.json").write_text("{}\n")
    proc, reasons = run(tmp_path, "main", "--check", "--diff")
    assert reasons[:4] == ["the blackwell-test.yaml file differs from the one that last passed the health gate",
                           "the release changed (a to b)",
                           "the running service was started with another unit, environment file or release",
                           f"{root / 'model'} moved (r1 to r2)"], reasons
    assert len(reasons) == 5 and str(root / "model" / ".repairs.json") in reasons[4], reasons
    assert "blackwell-test.service would restart: " + ", ".join(reasons) in proc.stdout
    # check mode changed nothing
    assert json.loads((root / "deployed" / "started.json").read_text()) == note
    assert os.readlink(root / "deployed" / "release") == str(root / "releases" / "a")


class Health(http.server.BaseHTTPRequestHandler):
    """/health answers 200 while the environment file says healthy, else 503."""
    env = None

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if "healthy" in self.env.read_text() else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def healthy(tmp_path):
    """The host of host(), its environment file saying healthy, and a /health endpoint that reads it: (root, env,
    url, systemctl's log)."""
    root = host(tmp_path)
    env = root / "etc" / "blackwell-test.yaml"
    env.write_text("healthy: 1\n")
    Health.env = env
    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, env, f"http://127.0.0.1:{server.server_port}", tmp_path / "bin" / "systemctl.log"
    server.shutdown()


def test_a_change_that_passes_is_recorded_and_one_that_fails_is_rolled_back(tmp_path, healthy):
    root, env, url, log = healthy
    shutil.copy(env, root / "deployed" / env.name)
    # the release moved (and no note of a start yet: what last passed is what runs): restarted, noted, gated,
    # recorded
    os.unlink(root / "current")
    os.symlink(root / "releases" / "b", root / "current")
    proc, reasons = run(tmp_path, "main", url=url)
    assert reasons == ["the release changed (a to b)"], reasons
    assert "Restart the service (the release changed (a to b)" in proc.stdout
    assert os.readlink(root / "deployed" / "release") == str(root / "releases" / "b")
    assert json.loads((root / "deployed" / "gate.json").read_text()) == {"url": url, "api_key": ""}
    assert json.loads((root / "deployed" / "started.json").read_text())["release"] == str(root / "releases" / "b")
    calls = log.read_text().splitlines()
    assert calls.count("reset-failed blackwell-test.service") == 1, calls
    assert calls.count("restart blackwell-test.service") == 1 and "daemon-reload" not in calls, calls
    assert run(tmp_path, "main", url=url)[1] == [], "a second run found a reason to restart"

    # an environment file and a release that fail the gate, asked at another address: rolled back to the record
    # and gated where it passed
    log.unlink()
    env.write_text("healthy: no more\n".replace("healthy", "broken"))
    os.unlink(root / "current")
    os.symlink(root / "releases" / "a", root / "current")
    proc, _ = run(tmp_path, "main", ok=False, url="http://127.0.0.1:9")
    assert "did not pass the health gate at http://127.0.0.1:9" in proc.stdout
    assert "the stand-in server refused its settings" in proc.stdout
    assert "ROLLED BACK" in proc.stdout and "again on b, with" in proc.stdout and "and is healthy" in proc.stdout
    assert env.read_text() == "healthy: 1\n" and oct(env.stat().st_mode & 0o777) == "0o640"
    assert os.readlink(root / "current") == str(root / "releases" / "b")
    assert os.readlink(root / "deployed" / "release") == str(root / "releases" / "b")
    assert json.loads((root / "deployed" / "started.json").read_text())["env"] == sha256(env)
    calls = log.read_text().splitlines()
    # the change's restart and the rollback's, from a clean start-limit count, systemd reloaded for the unit put back
    assert calls.count("reset-failed blackwell-test.service") == 2, calls
    assert calls.count("restart blackwell-test.service") == 2 and "daemon-reload" in calls, calls


def test_the_restart_entry_point_reloads_restarts_notes_and_gates(tmp_path, healthy):
    """A caller that put a unit back itself (sglang_service's revert) asks the entry point `restart`: systemd reloaded
    so that the unit on disk is the one that starts, from a clean start-limit count, what it started with noted, and
    gated; a service that fails the gate fails the run."""
    root, env, url, log = healthy
    run(tmp_path, "restart", url=url)
    calls = log.read_text().splitlines()
    assert calls.index("reset-failed blackwell-test.service") < calls.index("daemon-reload") \
        < calls.index("restart blackwell-test.service"), calls
    assert json.loads((root / "deployed" / "started.json").read_text())["env"] == sha256(env)
    env.write_text("broken: 1\n")
    proc, _ = run(tmp_path, "restart", url=url, ok=False)
    assert "did not pass the health gate" in proc.stdout


@pytest.mark.parametrize("unit_file_state, unit_changed, enabled, reloaded", [
    ("enabled", False, False, False),   # the read holds: the enablement task is skipped
    ("disabled", False, True, False),   # enabled, as the read said it was not
    ("enabled", True, True, True),      # a unit this run wrote: enabled and systemd reloaded, whatever was read
])
def test_the_unit_is_enabled_where_the_read_says_it_is_not_or_was_just_written(
        tmp_path, healthy, monkeypatch, unit_file_state, unit_changed, enabled, reloaded):
    root, env, url, log = healthy
    shutil.copy(env, root / "deployed" / env.name)
    run(tmp_path, "started")
    log.unlink(missing_ok=True)
    monkeypatch.setenv("STUB_UNIT_FILE_STATE", unit_file_state)
    run(tmp_path, "main", url=url, unit_changed=unit_changed)
    calls = log.read_text().splitlines()
    asked = any(c.startswith("is-enabled") or c.startswith("enable ") for c in calls)
    assert asked == (unit_file_state != "enabled" or unit_changed), calls
    assert ("enable blackwell-test.service" in calls) == (enabled and unit_file_state != "enabled"), calls
    assert ("daemon-reload" in calls) == reloaded, calls
