"""The install paths on the Debian family read packages with host_state, not package_facts. package_facts' result
is a fact (ansible_facts['packages']): the fact cache kept it after a converging run (hundreds of kilobytes on a
real server) and every task of every later run that does not clear the cache (verify.yml, drift.yml) decoded and
copied it. A registered read is gone with the run. The RPM family keeps package_facts (host_state reads dpkg)."""
import json

import yaml

from conftest import REPO, run_local_playbook

# the role's own expressions, rendered by ansible-playbook for every case at once
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars_files: [{driver}/defaults/main.yml, {driver}/vars/main.yml, {driver}/vars/Debian_12.yml,
               {toolkit}/defaults/main.yml, {toolkit}/vars/main.yml]
  tasks:
    - name: Render
      ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        mode: "0644"
        content: >-
          {{{{ {{'driver': __nvidia_driver_installed,
                'release': read.installed.keys() | select('ansible.builtin.regex', __cuda_toolkit_release_regex)
                           | sort,
                'drivers': read.installed.keys() | select('ansible.builtin.regex', __cuda_toolkit_driver_regex)
                           | sort}} | to_json }}}}
      vars:
        __nvidia_driver_packages_read: "{{{{ read }}}}"
"""


def tasks_of(path):
    return [t for t in (yaml.safe_load(path.read_text()) or []) if isinstance(t, dict)]


def walk(tasks):
    for task in tasks:
        yield task
        for key in ("block", "rescue", "always"):
            yield from walk(task.get(key, []))


def test_no_debian_path_sets_the_packages_fact():
    users = []
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")):
        users += [path.relative_to(REPO).as_posix() for t in walk(tasks_of(path)) if "ansible.builtin.package_facts" in t]
    for path in sorted(REPO.glob("playbooks/*.yml")):
        for play in tasks_of(path):
            for t in walk(play.get("pre_tasks", []) + play.get("tasks", []) + play.get("post_tasks", [])):
                users += [path.relative_to(REPO).as_posix()] if "ansible.builtin.package_facts" in t else []
    assert users and all(u.endswith("-redhat.yml") for u in users), users
    for path in REPO.glob("roles/*/tasks/*debian*.yml"):
        assert "ansible_facts['packages']" not in path.read_text(), path


def test_what_the_reads_answer_is_judged_as_package_facts_was(tmp_path):
    installed = {"nvidia-open": "580.95.05-1", "nvidia-kernel-open-dkms": "580.95.05-1",
                 "libnvidia-compute": "580.82.07-1", "firmware-nvidia-gsp": "580.95.05-1",
                 # versions of their own: not the driver's
                 "nvidia-driver-pinning-580": "1.0", "nvidia-container-toolkit": "1.17.8-1",
                 "cuda-nvcc-13-0": "13.0.88-1", "cuda-cudart-13-0": "13.0.96-1", "cuda-nvcc-12-9": "12.9.86-1",
                 "cuda-toolkit-13-0-config-common": "13.0.96-1", "cuda-drivers-580": "580.95.05-1",
                 "libcuda1": "580.95.05-1", "bash": "5.2.15-2"}
    out = tmp_path / "out.json"
    run_local_playbook(tmp_path, PLAYBOOK.format(driver=REPO / "roles/nvidia_driver", toolkit=REPO / "roles/cuda_toolkit"),
                       {"out": str(out), "cuda_toolkit_version": "13.0.2",
                        "read": {"changed": False, "holds": True, "installed": installed}})
    got = json.loads(out.read_text())
    assert sorted(got["driver"], key=lambda p: p["name"]) == [
        {"name": n, "version": installed[n]} for n in
        sorted(["nvidia-open", "nvidia-kernel-open-dkms", "libnvidia-compute", "firmware-nvidia-gsp",
                "cuda-drivers-580", "libcuda1"])]
    assert got["release"] == ["cuda-cudart-13-0", "cuda-nvcc-13-0"]
    # the pinning package counts too: the toolkit is judged by what it adds, before against after
    assert got["drivers"] == ["cuda-drivers-580", "libcuda1", "nvidia-driver-pinning-580", "nvidia-kernel-open-dkms",
                              "nvidia-open"]
