"""nvidia_driver on apt: the running kernel's headers, which DKMS builds against (issue 32, point 2). A host whose
kernel was upgraded and not rebooted may run a kernel whose headers the archive has dropped (Debian lists only the
newest ABIs): the role then stops before any change naming the kernels, or, allowed to reboot, installs the headers
of the kernel the host boots next only. Run by ansible-playbook on this machine with a stand-in apt-cache on PATH
that answers in the real command's shape (tests/fixtures/apt/)."""
import json
import os
import stat

import pytest

from conftest import REPO, run_local_playbook

ROLE = REPO / "roles" / "nvidia_driver"
KERNEL = os.uname().release

def headers_playbook(vars_file, tasks_from):
    """The role's headers tasks on this machine, with a platform's vars; what they decided, written to {{ out }}."""
    return f"""
- hosts: localhost
  gather_facts: true
  gather_subset: [min]
  tasks:
    - ansible.builtin.include_vars: {ROLE / "vars" / vars_file}
    - ansible.builtin.include_role:
        name: blackwell.serving.nvidia_driver
        tasks_from: {tasks_from}
        public: true
    - ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        mode: "0644"
        content: "{{{{ {{'state': __nvidia_driver_running_headers, 'install': __nvidia_driver_headers}} | to_json }}}}"
"""


PLAYBOOK = headers_playbook("Debian_12.yml", "headers")


def entry(name, installed=None, candidate=None, source="http://deb.debian.org/debian bookworm/main amd64 Packages"):
    lines = [f"{name}:", f"  Installed: {installed or '(none)'}", f"  Candidate: {candidate or '(none)'}",
             "  Version table:"]
    for version in dict.fromkeys(v for v in (candidate, installed) if v):
        lines.append(f" {'***' if version == installed else '   '} {version} 500")
        if version == candidate:
            lines.append(f"        500 {source}")
        if version == installed:
            lines.append("        100 /var/lib/dpkg/status")
    return "\n".join(lines) + "\n"


RUNNING = f"linux-headers-{KERNEL}"
META = "linux-headers-amd64"
CASES = {
    "installed": entry(RUNNING, installed="1.0-lab") + entry(META, installed="6.1.158-1", candidate="6.1.158-1"),
    "offered": entry(RUNNING, candidate="6.1.158-1") + entry(META, candidate="6.1.158-1"),
    # the archive has moved on: the running kernel's headers are known to no source, the metapackage is
    "gone": entry(META, installed="6.1.153-1", candidate="6.1.158-1"),
    # package lists never read: apt knows neither; the install reads them and asks again
    "unknown": "",
}


def play(tmp_path, monkeypatch, case, **extra):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "policy.txt").write_text(CASES[case])
    fake = bin_dir / "apt-cache"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = policy ] || exit 100\ncat {tmp_path / 'policy.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out.json"
    run_local_playbook(tmp_path, PLAYBOOK, {"out": str(out), **extra})
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", ["installed", "offered", "unknown"])
def test_the_running_kernels_headers_are_installed_where_they_can_be(tmp_path, monkeypatch, case):
    got = play(tmp_path, monkeypatch, case)
    assert got == {"state": case, "install": [META, RUNNING]}


def test_headers_gone_stop_before_any_change_naming_the_kernel(tmp_path, monkeypatch):
    with pytest.raises(AssertionError) as failed:
        play(tmp_path, monkeypatch, "gone")
    said = str(failed.value)
    assert f"the running kernel {KERNEL} has no headers package any more" in said
    assert "the kernels installed are" in said and "Nothing was changed" in said
    assert "nvidia_driver_reboot=true" in said


def test_headers_gone_with_a_reboot_allowed_build_for_the_next_kernel_only(tmp_path, monkeypatch):
    got = play(tmp_path, monkeypatch, "gone", nvidia_driver_reboot=True)
    assert got == {"state": "gone", "install": [META]}


# --- RHEL family: rpm says whether kernel-devel of the running kernel is installed, dnf whether a repository offers it
# (its mirrors keep the newest kernels' only); the stop that follows is the one above, shared
RHEL_PLAYBOOK = headers_playbook("RedHat.yml", "headers-redhat")


@pytest.mark.parametrize("installed, offered, state", [(True, False, "installed"), (False, True, "offered"),
                                                       (False, False, "gone")])
def test_rhel_the_running_kernels_devel_is_asked_for_only_where_it_can_be_had(tmp_path, monkeypatch, installed,
                                                                              offered, state):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    running = f"kernel-devel-{KERNEL}"
    (bin_dir / "rpm").write_text(f"#!/bin/sh\n[ \"$2\" = {running} ] && {'exit 0' if installed else 'exit 1'}\nexit 1\n")
    # dnf repoquery prints the packages an enabled repository offers, nothing (rc 0) when none does
    (bin_dir / "dnf").write_text("#!/bin/sh\n" + (f"echo {running}-0:1.el9.x86_64\n" if offered else "") + "exit 0\n")
    for tool in ("rpm", "dnf"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out.json"
    run_local_playbook(tmp_path, RHEL_PLAYBOOK, {"out": str(out)})
    got = json.loads(out.read_text())
    assert got["state"] == state
    assert got["install"] == ["kernel-devel", "kernel-headers"] + ([] if state == "gone" else [running])
