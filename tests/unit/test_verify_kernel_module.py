"""verify names a host whose running kernel has no built NVIDIA module (issue 12, case 5)."""
from ansible_collections.blackwell.serving.plugins.module_utils import verify

EXPECTED = {"gpu_count": 8, "gpu_name": "RTX PRO 6000", "compute_capability": "12.0", "kernel_module": "open",
            "driver_version": "580.95.05"}
KERNEL = "6.1.0-41-amd64"


def check(files):
    checks = verify.judge(EXPECTED, {"gpu": {"state": "not gathered"}, "kernel": KERNEL,
                                     "kernel_module_files": files}, ("gpu",))
    return {c["name"]: c for c in checks}["kernel_module_built"]


def test_a_kernel_without_the_module_fails_naming_the_kernel():
    c = check([f"/lib/modules/{KERNEL}/kernel/drivers/video/nvidia-drm.ko"])
    assert not c["ok"] and c["found"] == "none"
    assert KERNEL in c["expected"] and KERNEL in c["hint"] and "headers" in c["hint"]


def test_a_dkms_built_module_passes_compressed_or_not():
    assert check([f"/lib/modules/{KERNEL}/updates/dkms/nvidia.ko.xz"])["ok"]
    assert check([f"/lib/modules/{KERNEL}/updates/dkms/nvidia.ko"])["ok"]


def test_not_gathered_adds_no_check():
    names = [c["name"] for c in verify.judge(EXPECTED, {"gpu": {"state": "not gathered"}}, ("gpu",))]
    assert "kernel_module_built" not in names
