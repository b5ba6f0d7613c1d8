"""nvidia_driver's Secure Boot check, run by ansible-playbook on this machine against a stand-in for the EFI
variable (its path is the role's variable __nvidia_driver_sb_var): one read says whether the variable is there and
what its fifth byte is. Secure Boot on stops the role before anything changes; off, or no EFI variable (a BIOS
boot), passes; a variable that cannot be read stops it with what od said, not with a wrong verdict."""
import pytest

from conftest import run_local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.nvidia_driver
        tasks_from: secure_boot
"""

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
    path = tmp_path / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    if var == "directory":
        path.mkdir()
    elif var != "absent":
        path.write_bytes(var)
    args = {"__nvidia_driver_sb_var": str(path), "nvidia_driver_secure_boot_check": check}
    if says is None:
        proc = run_local_playbook(tmp_path, PLAYBOOK, args)
        assert "Read the Secure Boot EFI variable" in proc.stdout
    else:
        with pytest.raises(AssertionError) as failed:
            run_local_playbook(tmp_path, PLAYBOOK, args)
        assert says in str(failed.value) and "Nothing was changed" in str(failed.value)
