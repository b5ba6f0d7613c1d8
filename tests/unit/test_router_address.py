"""The drain and restore of a server (playbooks/repin.yml) reach each router where it listens: at its
sglang_router_host and sglang_router_port, as the router's own tasks do, not at 127.0.0.1 (issue 15, point 4).

The router is a stand-in of sglang-router's worker API bound to 127.0.0.2 (this machine's loopback, but not
127.0.0.1), driven through the role's real `drain` and `restore` entry points by ansible-playbook, with no lab."""
import json
import os
import subprocess
import sys
from pathlib import Path

from modrun import REPO, fake_router

PLAYBOOK = """
- name: Drain this server out of the routers, then put it back
  hosts: gpu_servers
  gather_facts: false
  tasks:
    - name: Drain
      ansible.builtin.include_role:
        name: blackwell.serving.sglang_router
        tasks_from: drain
    - name: What the router lists after the drain
      ansible.builtin.uri:
        url: "{{ router_url }}/workers"
      register: after_drain
    - name: Restore
      ansible.builtin.include_role:
        name: blackwell.serving.sglang_router
        tasks_from: restore
    - name: Record
      ansible.builtin.copy:
        content: "{{ after_drain.json | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def _run(tmp_path, router, server_url, port, api_key=None):
    inventory = {"all": {"children": {
        "sglang_routers": {"hosts": {"router-1": {"sglang_router_host": "127.0.0.2", "sglang_router_port": port}}},
        "gpu_servers": {"hosts": {"gpu-1": {"sglang_router_worker_url": server_url}}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "sglang_router_drain_grace": 0, **({"sglang_service_api_key": api_key} if api_key else {})}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    out = tmp_path / "after-drain.json"
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "pb.yml"), "-e", json.dumps({"out": str(out), "router_url": router.url})],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    return proc, out


def test_drain_and_restore_reach_a_router_bound_to_another_address(tmp_path):
    with fake_router("127.0.0.2") as router:
        port = int(router.url.rsplit(":", 1)[1])
        server = router.url  # the stand-in answers the drained server's /metrics too
        other = "http://10.9.9.9:30000"
        router.workers = [{"id": "w-other", "url": other, "is_healthy": True},
                          {"id": "w-me", "url": server, "is_healthy": True}]
        proc, out = _run(tmp_path, router, server, port)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        assert [w["url"] for w in json.loads(out.read_text())["workers"]] == [other], "the drain did not happen"
        assert sorted(w["url"] for w in router.workers) == sorted([other, server]), "the restore did not happen"


def test_a_server_put_back_carries_the_api_key(tmp_path):
    """sglang-router 0.3.2 warns of a worker added without the key while it has one, and its own health checks
    then reach the server without it (401 from a server with a key): the restore adds the worker with the key."""
    key = "lab-key-0123456789"
    with fake_router("127.0.0.2", api_key=key) as router:
        port = int(router.url.rsplit(":", 1)[1])
        server = router.url
        router.workers = [{"id": "w-other", "url": "http://10.9.9.9:30000", "is_healthy": True},
                          {"id": "w-me", "url": server, "is_healthy": True}]
        proc, _out = _run(tmp_path, router, server, port, api_key=key)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        added = [w for w in router.workers if w["url"] == server]
        assert added and added[0]["api_key"] == key
        assert router.warnings == []
        assert key not in proc.stdout


MEMBERSHIP = """
- name: Each server in the routers
  hosts: gpu_servers
  gather_facts: false
  tasks:
    - name: Membership
      ansible.builtin.include_role:
        name: blackwell.serving.sglang_router
        tasks_from: membership
    - name: Record
      ansible.builtin.copy:
        content: "{{ sglang_router_membership | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def test_membership_says_where_the_server_stands_in_each_router(tmp_path):
    """A drained server (out of the router) and an entry the inventory does not know, as the router lists them."""
    with fake_router("127.0.0.2") as router:
        port = int(router.url.rsplit(":", 1)[1])
        server = router.url
        router.workers = [{"id": "w-other", "url": "http://10.9.9.9:30000", "is_healthy": True}]
        (tmp_path / "pb.yml").write_text(MEMBERSHIP)
        inventory = {"all": {"children": {
            "sglang_routers": {"hosts": {"router-1": {"sglang_router_host": "127.0.0.2", "sglang_router_port": port}}},
            "gpu_servers": {"hosts": {"gpu-1": {"sglang_router_worker_url": server}}}},
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
        (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
        out = tmp_path / "membership.json"
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))

        def play(*extra):
            proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                                   str(tmp_path / "hosts.yml"), str(tmp_path / "pb.yml"), *extra,
                                   "-e", json.dumps({"out": str(out)})], capture_output=True, text=True, env=env,
                                  timeout=300, cwd=tmp_path)
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
            return json.loads(out.read_text())

        sliced = play("--limit", "gpu-1")
        assert sliced == {"routers": {}, "unknown": {}}
        assert router.requests == [], "a router the run leaves out is not asked"
        assert [c["name"] for c in verify_checks(sliced)] == []
        drained = play()
        assert drained["routers"]["router-1"] == {"listed": False, "healthy": False, "error": None}
        assert drained["unknown"] == {"router-1": ["http://10.9.9.9:30000"]}
        router.workers.append({"id": "w-me", "url": server, "is_healthy": True})
        back = play()
        assert back["routers"]["router-1"] == {"listed": True, "healthy": True, "error": None}


def verify_checks(membership):
    from ansible_collections.blackwell.serving.plugins.module_utils import verify
    return verify._routers(membership)


def test_verify_and_drift_fail_a_drained_server_and_a_stranger():
    from ansible_collections.blackwell.serving.plugins.module_utils import verify
    membership = {"routers": {"router-1": {"listed": False, "healthy": False, "error": None},
                              "router-2": {"listed": True, "healthy": True, "error": None}},
                  "unknown": {"router-2": ["http://10.9.9.9:30000"]}}
    checks = {c["name"]: c for c in verify._routers(membership)}
    assert not checks["router_membership"]["ok"] and checks["router_membership"]["found"] == "router-1: not listed"
    assert not checks["router_entries"]["ok"] and "router-2: http://10.9.9.9:30000" in checks["router_entries"]["found"]
    items = [d["item"] for d in verify.drift([], routers=membership)]
    assert items == ["router_membership", "router_entries"]
    fine = {"routers": {"router-1": {"listed": True, "healthy": True, "error": None}}, "unknown": {}}
    assert verify.drift([], routers=fine) == []


def test_a_drain_that_times_out_says_what_the_server_still_runs():
    """A server that still reports requests when drain_timeout is up stays out of the router, and the message says
    how many its /metrics reported at the last look (a stuck count and a slow finish read differently)."""
    from modrun import run_module
    with fake_router() as router:
        router.metrics = b"sglang:num_running_reqs 2\nsglang:num_queue_reqs 1\n"
        router.workers = [{"id": "w-other", "url": "http://10.9.9.9:30000", "is_healthy": True},
                          {"id": "w-me", "url": router.url, "is_healthy": True}]
        out = run_module("sglang_router_worker", {"router_url": router.url, "url": router.url, "state": "absent",
                                                  "drain_timeout": 1, "drain_grace": 0})
    assert out.get("failed"), out
    assert "still runs requests after 1 s" in out["msg"] and "said 3 running or queued" in out["msg"], out["msg"]
    assert out["running"] == 3
    assert [w["id"] for w in router.workers] == ["w-other"], "the server was put back while it still runs requests"
