"""model_weights as site.yml runs it (entry point `start` early, the main entry point plays later), by
ansible-playbook on this machine against a revision's directory tree, a Hub stand-in and a stand-in of the `hf`
client: each entry point decides from its own read of the host, and a converged host costs the main entry point
one round trip. What each run asks the host, changes, downloads and asks the Hub is recorded and asserted; nothing
a play registered is trusted by a later play (a marker removed, a file cut short or the link moved between two
plays is found by the next)."""
import getpass
import grp
import hashlib
import json
import os
import stat
import sys
import textwrap

import pytest

from conftest import REPO, run_local_playbook
from modrun import run_module, serve

ROLE = "blackwell.serving.model_weights"
REPO_ID = "org/model"
A, B = "a" * 40, "b" * 40
FILES = {"config.json": b'{"model_type": "glm_moe_dsa"}\n', "model-00001.safetensors": b"\x01" * 65536}
MARKER = ".blackwell-snapshot.json"
# benchmarks/fleet_noop.py's callback: per task, its play, action, outcomes and round trips (module calls on the host)
PROFILE = REPO / "benchmarks" / "callback_plugins"

# site.yml's order: the early start, the plays between (here one that may change the host), the main entry point
# (a host of both the model cache's group and the servers' runs the main entry point first, instead of the start)
PLAYBOOK = """
- name: start
  hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: {role}
        tasks_from: {first}

- name: between
  hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.command:
        argv: [sh, -c, "{{{{ between }}}}"]
      when: between | length > 0

- name: main
  hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.import_role:
        name: {role}
    - ansible.builtin.copy:
        content: "{{{{ {{'previous_dir': model_weights_previous_dir | default('')}} | to_json }}}}"
        dest: "{{{{ out }}}}"
        mode: "0644"
      check_mode: false
"""


def blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture
def hub():
    """The Hub's tree listing of revisions A and B (the same files); each request is kept."""
    listing = []
    for path, data in FILES.items():
        entry = {"type": "file", "path": path, "size": len(data), "oid": blob(data)}
        if path.endswith(".safetensors"):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}
        listing.append(entry)
    requests = []

    def answer(path):
        requests.append(path)
        return (200, json.dumps(listing).encode()) if any(f"/tree/{r}?" in path for r in (A, B)) else (404, b"{}")

    with serve(answer) as url:
        yield url, requests


class Host:
    """This machine as a host: a model path, its revisions, a virtual environment with a stand-in `hf`."""

    def __init__(self, root, endpoint, requests):
        self.root, self.endpoint, self.requests = root, endpoint, requests
        self.model = root / "model"
        self.revisions = root / "model.revisions"
        self.venv = root / "venv"
        self.source = root / "source"
        self.hf_log = root / "hf.log"
        self.profile = root / "profile.json"
        (self.venv / "bin").mkdir(parents=True)
        self.source.mkdir()
        for path, data in FILES.items():
            (self.source / path).write_bytes(data)
        # the first download lasts until the main entry point has started its own client (a long download)
        self.hf_hold = False
        # the probe of tool.yml: huggingface_hub at the pinned version, nothing to install
        self._script(self.venv / "bin" / "python", "#!/bin/sh\necho 1.33.0\n")

    @staticmethod
    def _script(path, text):
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def write_hf(self):
        """`hf download REPO --revision SHA --local-dir DIR`: copies the revision's files there, logging when it
        started and ended. With hf_hold, where a file is missing it first waits (two minutes at most) until a
        second client waits for the lock it runs under (the main entry point's): a download that outlasts the plays
        between."""
        self._script(self.venv / "bin" / "hf", textwrap.dedent(f"""\
            #!{sys.executable}
            import os, shutil, sys, time
            def waiting(lock):  # the flock processes that run or wait for lock
                found = []
                for pid in filter(str.isdigit, os.listdir("/proc")):
                    try:
                        argv = open("/proc/" + pid + "/cmdline", "rb").read().split(b"\\0")
                    except OSError:
                        continue
                    if len(argv) > 1 and argv[0].endswith(b"flock") and argv[1] == lock.encode():
                        found.append(pid)
                return found
            args = sys.argv[1:]
            dest = args[args.index("--local-dir") + 1]
            with open({str(self.hf_log)!r}, "a") as fh:
                fh.write("start %f %s\\n" % (time.time(), " ".join(args)))
            deadline = time.time() + 120
            while {self.hf_hold!r} and time.time() < deadline \\
                    and not all(os.path.exists(dest + "/" + name) for name in {sorted(FILES)!r}):
                if len(waiting(dest + "/.cache/blackwell-download.lock")) > 1:
                    break
                time.sleep(0.2)
            for name in {sorted(FILES)!r}:
                shutil.copyfile({str(self.source)!r} + "/" + name, dest + "/" + name)
            with open({str(self.hf_log)!r}, "a") as fh:
                fh.write("end %f\\n" % time.time())
            """))

    def converged(self, revision=A):
        """The revision downloaded, verified and recorded (by model_snapshot, as a run of the role leaves it), and
        in service."""
        for path in (self.revisions, self.revisions / revision, self.revisions / revision / ".cache"):
            path.mkdir(exist_ok=True)
            path.chmod(0o755)
        for path, data in FILES.items():
            (self.revisions / revision / path).write_bytes(data)
        done = run_module("model_snapshot", {"path": str(self.revisions / revision), "repo_id": REPO_ID,
                                             "revision": revision, "endpoint": self.endpoint, "state": "verified"})
        assert done["complete"], done
        self.model.symlink_to(self.revisions / revision)
        self.requests.clear()

    def run(self, between="", check=False, first="start"):
        self.write_hf()
        out = self.root / "out.json"
        return run_local_playbook(self.root, PLAYBOOK.format(role=ROLE, first=first), {
            "out": str(out), "between": between, "model_weights_repo_id": REPO_ID,
            "model_weights_path": str(self.model), "model_weights_revision": A,
            "model_weights_owner": getpass.getuser(), "model_weights_group": grp.getgrgid(os.getgid()).gr_name,
            "model_weights_token": "", "model_weights_endpoint": self.endpoint,
            "model_weights_venv": str(self.venv), "model_weights_free_space_margin_gib": 0,
            "model_weights_progress_interval": 1,
            # the virtual environment is there (role uv_venv's output); become as this user, without sudo
            "uv_venv_envs": {str(self.venv): {"uv": "/bin/false"}}, "ansible_become_method": "su"}, check=check)

    def tasks(self, play):
        """The role's tasks in one play, in order, as the benchmark's callback counts them."""
        return [t for t in json.loads(self.profile.read_text()) if t["play"] == play and t["role"] != "(play)"]

    def round_trips(self, play):
        """The actions of the role's tasks that ran a module on the host in one play, once per round trip."""
        return [t["action"] for t in self.tasks(play) for _ in range(t["round_trips"])]

    def changed(self, play):
        return [t["task"] for t in self.tasks(play) if t["changed"]]

    def snapshot_recorded(self, play):
        """Whether a play recorded the snapshot (model_snapshot changed: it wrote the marker)."""
        return any(t["action"] == "model_snapshot" and t["changed"] for t in self.tasks(play))

    def hf_runs(self):
        return [line.split() for line in self.hf_log.read_text().splitlines()] if self.hf_log.exists() else []


@pytest.fixture(autouse=True)
def profile(tmp_path, monkeypatch):
    monkeypatch.setenv("ANSIBLE_CALLBACK_PLUGINS", str(PROFILE))
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "role_profile")
    monkeypatch.setenv("BLACKWELL_ROLE_PROFILE", str(tmp_path / "profile.json"))


@pytest.fixture
def host(tmp_path, hub):
    return Host(tmp_path, *hub)


def test_a_converged_host_costs_the_main_entry_point_one_round_trip_and_changes_nothing(host):
    host.converged()
    host.run()
    # one read each: the early start and the main entry point, each its own
    assert host.round_trips("start") == ["host_state"]
    assert host.round_trips("main") == ["host_state"]
    assert host.changed("start") == [] and host.changed("main") == []
    assert host.hf_runs() == [] and host.requests == [], "a converged host downloaded or asked the Hub"
    assert os.readlink(host.model) == str(host.revisions / A)


def test_check_mode_on_a_converged_host_reads_once_and_changes_nothing(host):
    host.converged()
    marker = (host.revisions / A / MARKER).read_text()
    host.run(check=True)
    assert host.round_trips("main") == ["host_state"]
    assert host.changed("main") == []
    assert (host.revisions / A / MARKER).read_text() == marker


def test_a_marker_removed_between_the_start_and_the_main_entry_point_is_verified_and_recorded_again(host):
    """The start found the revision complete; a play between removed its marker: the main entry point reads the
    host itself, asks the Hub for the manifest, hashes every file and records the snapshot again, downloading
    nothing (every file is there)."""
    host.converged()
    host.run(between=f"rm {host.revisions / A / MARKER}")
    assert host.round_trips("start") == ["host_state"]
    # without a marker: the Hub knows the revision (layout.yml), what is there, then every file verified and recorded
    assert host.round_trips("main").count("model_snapshot") == 3, host.round_trips("main")
    assert host.snapshot_recorded("main")
    assert host.hf_runs() == []
    assert host.requests, "the manifest was not asked for"
    recorded = json.loads((host.revisions / A / MARKER).read_text())
    assert recorded["revision"] == A and set(recorded["files"]) == set(FILES)


def test_a_file_cut_short_between_the_start_and_the_main_entry_point_is_downloaded_again(host):
    """The start found the revision complete; a play between cut a shard short (the marker still there): the main
    entry point finds it, downloads it again and verifies it."""
    host.converged()
    shard = host.revisions / A / "model-00001.safetensors"
    host.run(between=f"truncate -s 100 {shard}")
    assert [run[0] for run in host.hf_runs()] == ["start", "end"]
    assert shard.read_bytes() == FILES["model-00001.safetensors"]
    assert host.snapshot_recorded("main")


def test_a_link_moved_between_the_start_and_the_main_entry_point_is_put_back(host):
    """Where a play between moved the link (the early start's read saw it at the revision), the main entry point
    finds it moved, points it at the pinned revision again and keeps the other for a rollback."""
    host.converged()
    (host.revisions / B).mkdir()
    host.run(between=f"ln -sfn {host.revisions / B} {host.model}")
    assert os.readlink(host.model) == str(host.revisions / A)
    assert os.readlink(host.revisions / ".rollback") == str(host.revisions / B)
    assert json.loads((host.root / "out.json").read_text())["previous_dir"] == str(host.revisions / B)
    assert any("switch_link | Point the model path at revision " + A[:12] in t for t in host.changed("main"))


def test_a_download_the_start_began_is_waited_for_by_the_main_entry_point(host):
    """On a new host the start begins the download in the background; the main entry point, later, runs the client
    once more, which waits for the first (flock) and finds its files, then verifies, records and links the
    revision."""
    host.hf_hold = True
    host.run()
    runs = host.hf_runs()
    assert [r[0] for r in runs] == ["start", "end", "start", "end"], runs
    # the second began once the first had ended: it waited for the lock the first held
    assert float(runs[2][1]) >= float(runs[1][1]), runs
    assert "command" in host.round_trips("start"), "the start began no download"
    assert "download_progress" in host.round_trips("main")
    assert host.snapshot_recorded("main")
    assert json.loads((host.revisions / A / MARKER).read_text())["revision"] == A
    assert os.readlink(host.model) == str(host.revisions / A)


def test_a_link_moved_between_two_plays_of_the_main_entry_point_is_put_back(host):
    """The main entry point's read of the link in one play does not stand for a later play's: the second finds the
    link moved and puts it back."""
    host.converged()
    # B is the revision kept for a rollback: the first play prunes nothing
    (host.revisions / B).mkdir()
    (host.revisions / ".rollback").symlink_to(host.revisions / B)
    host.run(first="main", between=f"ln -sfn {host.revisions / B} {host.model}")
    assert host.round_trips("start") == ["host_state"]
    assert os.readlink(host.model) == str(host.revisions / A)
    assert any("switch_link | Point the model path at revision " + A[:12] in t for t in host.changed("main"))
