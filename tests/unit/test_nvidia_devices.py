"""Device access of the sglang unit after a reboot (issue 12, case 4): the production unit (the golden file, which
test_service_unit keeps equal to the rendered one) starts after the nvidia_driver role's boot unit, and grants
the uvm device by class, since its major number is chosen when the module loads."""
from conftest import FIXTURES, REPO

GOLDEN = (FIXTURES / "golden" / "production-sglang.service").read_text().splitlines()
DEVICES_UNIT = (REPO / "roles/nvidia_driver/templates/nvidia-devices.service.j2").read_text().splitlines()


def values(lines, key):
    return [ln.split("=", 1)[1] for ln in lines if ln.startswith(key + "=")]


def test_service_is_ordered_after_the_device_unit():
    assert "nvidia-devices.service" in " ".join(values(GOLDEN, "After")).split()
    assert "nvidia-devices.service" in " ".join(values(GOLDEN, "Wants")).split()


def test_uvm_by_device_class_not_by_a_path_that_may_not_exist_yet():
    allowed = values(GOLDEN, "DeviceAllow")
    assert "char-nvidia-uvm rw" in allowed
    assert not [a for a in allowed if a.startswith("/dev/nvidia-uvm")]


def test_the_device_unit_makes_the_uvm_node_as_root_at_boot():
    assert "Type=oneshot" in DEVICES_UNIT and "RemainAfterExit=yes" in DEVICES_UNIT
    assert "/usr/bin/nvidia-modprobe -u -c 0" in values(DEVICES_UNIT, "ExecStart")
    assert not values(DEVICES_UNIT, "User") and "nvidia-persistenced.service" in values(DEVICES_UNIT, "Before")[0]
    assert values(DEVICES_UNIT, "WantedBy") == ["multi-user.target"]
