"""The lab's stand-in PCI topology (lspci, setpci) and the driver role's ACS program run against it (issue 34): the
program clears redirection on the bridge above every GPU, once, and touches no other device."""
import os
import subprocess
import sys

import pytest

from conftest import REPO, run_local_playbook

IMAGE = REPO / "lab" / "image"
SMI = REPO / "lab" / "standins" / "nvidia_smi.py"


@pytest.fixture
def tools(tmp_path):
    """lspci and setpci as the image has them, on PATH, with their state in tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lib = IMAGE / "usr/lib/lab-standin"
    for tool in ("lspci", "setpci"):
        text = (IMAGE / "usr/local/sbin" / tool).read_text().replace("/usr/lib/lab-standin", str(lib))
        (bin_dir / tool).write_text(text.replace("#!/usr/bin/python3", f"#!{sys.executable}", 1))
        (bin_dir / tool).chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}",
                LAB_STANDIN_PCI_STATE=str(tmp_path / "pci.json"))


def run(env, *argv):
    return subprocess.run(list(argv), capture_output=True, text=True, env=env)


def acs_controls(env):
    out = run(env, "lspci", "-D", "-vvv").stdout
    controls, device = {}, None
    for line in out.splitlines():
        if line and not line.startswith("\t"):
            device = line.split()[0]
        elif "ACSCtl:" in line:
            controls[device] = line.split("ACSCtl:")[1].split()
    return controls


def test_the_gpus_are_where_the_stand_in_nvidia_smi_puts_them(tools, tmp_path):
    paths = [line.split()[0] for line in run(tools, "lspci", "-D", "-PP", "-n", "-d", "10de:").stdout.splitlines()]
    listed = [f"{p.split(':', 1)[0]}:{p.split('/')[-1]}" for p in paths]
    (tmp_path / "version").write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  x  \n")
    smi = tmp_path / "nvidia-smi"
    smi.write_text(SMI.read_text().replace("@LIB_VERSION@", "580.95.05"))
    env = dict(os.environ, LAB_NVIDIA_SMI_DATA=str(REPO / "tests/fixtures/gpu/rtx-pro-6000-x8-real"),
               LAB_NVIDIA_PROC_VERSION=str(tmp_path / "version"),
               LAB_NVIDIA_PERSISTENCED_PID=str(tmp_path / "none"))
    buses = subprocess.run([sys.executable, str(smi), "--query-gpu=pci.bus_id", "--format=csv,noheader"],
                           capture_output=True, text=True, env=env, check=True).stdout.split()
    assert [f"0000:{b.split(':', 1)[1].lower()}" for b in buses] == listed


def test_setpci_reads_and_writes_the_acs_control_register_of_a_bridge_only(tools):
    assert run(tools, "setpci", "-s", "0000:00:01.1", "ECAP_ACS+6.w").stdout == "001d\n"
    gpu = run(tools, "setpci", "-s", "0000:01:00.0", "ECAP_ACS+6.w")
    assert gpu.returncode == 1 and "Extended capability 000d not found" in gpu.stderr
    assert run(tools, "setpci", "-s", "00:01.1", "ECAP_ACS+6.w=0011").returncode == 0
    assert "ReqRedir-" in acs_controls(tools)["0000:00:01.1"]


def test_the_roles_acs_program_clears_redirection_above_every_gpu_once_and_nothing_else(tools, tmp_path):
    program = tmp_path / "pcie-acs-off"
    run_local_playbook(tmp_path, f"""
- hosts: localhost
  gather_facts: false
  vars:
    __nvidia_driver_acs_unit: blackwell-pcie-acs.service
  tasks:
    - ansible.builtin.copy:
        content: "{{{{ lookup('ansible.builtin.template', '{REPO}/roles/nvidia_driver/templates/pcie-acs-off.sh.j2') }}}}"
        dest: {program}
        mode: "0755"
""", {})
    before = acs_controls(tools)
    checked = run(tools, str(program), "--check")
    assert checked.returncode == 1 and checked.stdout.strip().endswith("8 bridge(s) to change")
    assert acs_controls(tools) == before
    first = run(tools, str(program))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().endswith("8 NVIDIA GPU(s); 8 bridge(s) changed")
    after = acs_controls(tools)
    gpu_bridges = {line.split()[0].split("/")[0] for line in run(tools, "lspci", "-D", "-PP", "-n", "-d", "10de:")
                   .stdout.splitlines()}
    for bridge in gpu_bridges:
        assert [f for f in after[bridge] if f[-1] == "+"] == ["SrcValid+", "UpstreamFwd+"]
    # the network card's bridge is as it was
    assert after["0000:c0:01.1"] == before["0000:c0:01.1"] and "ReqRedir+" in before["0000:c0:01.1"]
    again = run(tools, str(program))
    assert again.stdout.strip() == "8 NVIDIA GPU(s); 0 bridge(s) changed"
    assert run(tools, str(program), "--check").returncode == 0
