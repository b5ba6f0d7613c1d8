"""nvidia_driver's read of what the host must offer. Its Secure Boot check, run by ansible-playbook on this machine against a stand-in for the EFI
variable (its path is the role's variable __nvidia_driver_sb_var): one read says whether the variable is there and
what its fifth byte is. Secure Boot on stops the role before anything changes; off, or no EFI variable (a BIOS
boot), passes; a variable that cannot be read stops it with what od said, not with a wrong verdict. Its systemd tools (stand-ins at paths of the test's, the role's variable
__nvidia_driver_systemd_tools): one missing stops the role before anything changes, naming it (a chroot of a
userland without systemd, where the run would otherwise install the packages and fail at the first unit)."""
import pytest

from conftest import run_local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.nvidia_driver
        tasks_from: host
"""

def _tools(tmp_path, *present):
    """The two tools' paths under tmp_path/bin, those named present made there as files."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    for name in present:
        (tmp_path / "bin" / name).write_text("#!/bin/sh\n")
    return [str(tmp_path / "bin" / name) for name in ("systemctl", "systemd-analyze")]


ATTRIBUTES = bytes([0x06, 0x00, 0x00, 0x00])


@pytest.mark.parametrize("var, check, says", [
    ("absent", True, None),
    (ATTRIBUTES + b"\x00", True, None),
    (ATTRIBUTES + b"\x01", True, "Secure Boot is enabled"),
    (ATTRIBUTES + b"\x01", False, None),
    ("directory", True, "the Secure Boot state could not be read"),
    (ATTRIBUTES, True, None),
])
def test_secure_boot(tmp_path, var, check, says):
    tools = _tools(tmp_path, "systemctl", "systemd-analyze")
    path = tmp_path / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    if var == "directory":
        path.mkdir()
    elif var != "absent":
        path.write_bytes(var)
    args = {"__nvidia_driver_sb_var": str(path), "nvidia_driver_secure_boot_check": check,
            "__nvidia_driver_systemd_tools": tools}
    if says is None:
        proc = run_local_playbook(tmp_path, PLAYBOOK, args)
        assert "Read the Secure Boot EFI variable" in proc.stdout
    else:
        with pytest.raises(AssertionError) as failed:
            run_local_playbook(tmp_path, PLAYBOOK, args)
        assert says in str(failed.value) and "Nothing was changed" in str(failed.value)


@pytest.mark.parametrize("present, says", [
    ((), "systemctl and systemd-analyze are not on this host"),
    (("systemctl",), "systemd-analyze is not on this host"),
    (("systemd-analyze",), "systemctl is not on this host"),
])
def test_systemd_tools_missing_stop_before_any_change(tmp_path, present, says):
    args = {"__nvidia_driver_sb_var": str(tmp_path / "absent"), "__nvidia_driver_systemd_tools": _tools(tmp_path, *present)}
    with pytest.raises(AssertionError) as failed:
        run_local_playbook(tmp_path, PLAYBOOK, args)
    assert says in str(failed.value) and "Nothing was changed" in str(failed.value)
    assert "Install systemd first" in str(failed.value)


def test_chroot_without_systemd_says_so(tmp_path):
    """is_chroot: the message says the image lacks the package (building a golden image in a chroot)."""
    args = {"__nvidia_driver_sb_var": str(tmp_path / "absent"), "__nvidia_driver_systemd_tools": _tools(tmp_path),
            "ansible_facts": {"is_chroot": True}}
    with pytest.raises(AssertionError) as failed:
        run_local_playbook(tmp_path, PLAYBOOK, args)
    assert "a chroot: the image has no systemd package" in str(failed.value)
