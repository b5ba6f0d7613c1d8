"""One fleet operation at a time (plugins/module_utils/fleet_lock.py, module and action fleet_lock): taken, kept,
refused while another run holds it, taken over from a run that is gone, released. Run by ansible-playbook."""
import json
import os
import socket
import time

from ansible_collections.blackwell.serving.plugins.module_utils import fleet_lock
from conftest import run_local_playbook


def test_take_keep_refuse_take_over_release(tmp_path):
    path = str(tmp_path / "fleet.lock")
    me, other = {"token": "me", "pid": 1}, {"token": "other", "pid": 2}
    assert fleet_lock.take(path, me)[0] == "taken"
    assert fleet_lock.take(path, me)[0] == "held"
    state, holder = fleet_lock.take(path, other)
    assert state == "busy" and holder["token"] == "me"
    assert fleet_lock.take(path, other, takeover_token="not-the-holders")[0] == "busy"
    assert fleet_lock.take(path, other, takeover_token="me")[0] == "taken_over"
    assert fleet_lock.read(path)["token"] == "other"
    assert fleet_lock.release(path, "me") is False and fleet_lock.release(path, "other") is True
    assert fleet_lock.read(path) is None


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Take the fleet's lock
      blackwell.serving.fleet_lock:
        path: "{{ lock }}"
        operation: test.yml
        break_lock: "{{ break_it | default(false) }}"
      register: taken
      ignore_errors: true
    - name: Release it
      blackwell.serving.fleet_lock:
        path: "{{ lock }}"
        state: released
      when: release | default(false)
    - name: Record
      ansible.builtin.copy:
        content: "{{ taken | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""


def run(tmp_path, check=False, **extra):
    out = tmp_path / "out.json"
    proc = run_local_playbook(tmp_path, PLAYBOOK, {"out": str(out), "lock": str(tmp_path / "fleet.lock"), **extra},
                              check=check)
    return json.loads(out.read_text()), proc.stdout + proc.stderr


def write_lock(tmp_path, **holder):
    (tmp_path / "fleet.lock").write_text(json.dumps(dict({"user": "ops", "playbook": "repin.yml"}, **holder)))


def test_a_run_takes_the_lock_and_releases_it(tmp_path):
    taken, _ = run(tmp_path, release=True)
    assert taken["state"] == "taken" and taken["holder"]["playbook"] == "test.yml"
    assert taken["holder"]["controller"] == socket.gethostname()
    assert not (tmp_path / "fleet.lock").exists()
    # the lock lives only while the run does: the host is as it was, and a second run still reports nothing changed
    assert taken["changed"] is False


def test_check_mode_writes_no_lock_but_says_a_held_one_would_stop_the_run(tmp_path):
    taken, _ = run(tmp_path, check=True)
    assert taken["state"] == "taken" and not (tmp_path / "fleet.lock").exists()
    write_lock(tmp_path, controller="elsewhere", pid=1, token="elsewhere:1:1", since=time.time())
    taken, _ = run(tmp_path, check=True)
    assert taken["failed"] is True and "held by repin.yml run by ops on elsewhere" in taken["msg"]


def test_a_lock_held_by_a_live_run_stops_the_second_naming_it(tmp_path):
    # this test's own process, on this control node, stands for the run that holds it
    pid = os.getpid()
    start = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    write_lock(tmp_path, controller=socket.gethostname(), pid=pid, token=f"{socket.gethostname()}:{pid}:{start}",
               since=time.time())
    taken, _ = run(tmp_path)
    assert taken["failed"] is True and taken["state"] == "busy"
    assert "test.yml stops before any change: the fleet's lock" in taken["msg"]
    assert f"repin.yml run by ops on {socket.gethostname()} (process {pid}) since" in taken["msg"]
    assert "fleet_lock_break=true" in taken["msg"]
    assert json.loads((tmp_path / "fleet.lock").read_text())["pid"] == pid


def test_a_lock_left_by_a_gone_run_on_this_control_node_is_taken_over_with_a_message(tmp_path):
    write_lock(tmp_path, controller=socket.gethostname(), pid=999999999, token=f"{socket.gethostname()}:999999999:1",
               since=time.time())
    taken, out = run(tmp_path)
    assert taken["state"] == "taken_over" and "its process 999999999 on this control node is gone" in taken["msg"]
    assert "took the fleet's lock over from repin.yml run by ops" in out
    assert json.loads((tmp_path / "fleet.lock").read_text())["playbook"] == "test.yml"


def test_another_control_nodes_lock_is_kept_until_it_is_stale_or_broken(tmp_path):
    write_lock(tmp_path, controller="elsewhere", pid=1, token="elsewhere:1:1", since=time.time())
    assert run(tmp_path)[0]["state"] == "busy"
    assert run(tmp_path, break_it=True)[0]["state"] == "taken_over"
    write_lock(tmp_path, controller="elsewhere", pid=1, token="elsewhere:1:1", since=time.time() - 7 * 3600)
    taken, _ = run(tmp_path)
    assert taken["state"] == "taken_over" and "older than 21600 s" in taken["msg"]
