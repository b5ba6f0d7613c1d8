"""The fabric group of verify: its parsers (module_utils/fabric.py) on real captures, its judge
(module_utils/verify.py) seeing each check fail and pass, and gpu_facts gathering it in one call.

Captures: tests/fixtures/gpu/rtx-pro-6000-x8-asus-community/ (8x RTX PRO 6000, a community report), the lent
H100's (h100-device/captures/), the RTX PRO 6000 host's GPU 0 (rtx-pro-6000-x8-real/), and lines quoted in public
issues (xid-quoted/, p2p-quoted/). A failing variant is a real capture edited in memory.
"""
import json
import os

import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.serving.plugins.module_utils import fabric, verify

ASUS = FIXTURES / "gpu" / "rtx-pro-6000-x8-asus-community"
H100 = FIXTURES / "gpu" / "h100-device" / "captures"
RTX = FIXTURES / "gpu" / "rtx-pro-6000-x8-real"
XID = FIXTURES / "gpu" / "xid-quoted"
P2P = FIXTURES / "gpu" / "p2p-quoted"

# GPU 0 of the ASUS host sits behind root port 00:01.1, switch upstream port 01:00.0, downstream port 02:03.0
ASUS_PATH = ["0000:00:01.1", "0000:01:00.0", "0000:02:03.0"]
LSPCI = {"0000:00:01.1": "lspci-vv-00-01.1.txt", "0000:01:00.0": "lspci-vv-01-00.0.txt",
         "0000:02:03.0": "lspci-vv-02-03.0.txt"}

EXPECTED = {"fabric": {"iommu": "any", "kernel_args": {}, "module_params": {}, "acs_off": ["ReqRedir", "CmpltRedir",
                                                                                          "EgressCtrl"],
                       "bar1_min_mib": 98304, "xid_fatal": [48, 79, 95, 119, 120, 154]}}


def read(path):
    return path.read_text(encoding="utf-8")


def expected(**fabric_over):
    return {"fabric": dict(EXPECTED["fabric"], **fabric_over)}


def asus_found(smi_q=None, lspci=None, cmdline=None, p2p=None, log=""):
    """What gpu_facts gathers on the ASUS host, from its captures (each replaceable by an edited copy)."""
    gpus = fabric.smi_q_fabric(smi_q if smi_q is not None else read(ASUS / "nvidia-smi-q.txt"))
    texts = {bdf: read(ASUS / name) for bdf, name in LSPCI.items()}
    texts.update(lspci or {})
    first = gpus[0]["pci_bus_id"]
    fab = {"cmdline": cmdline if cmdline is not None else read(ASUS / "proc-cmdline.txt").strip(),
           "module_params": {}, "gpus": gpus,
           "paths": {"0000:06:00.0": ASUS_PATH}, "iommu_groups": {"0000:06:00.0": None},
           "bridges": {bdf: dict(fabric.parse_lspci_acs(t), bdf=bdf) for bdf, t in texts.items()},
           "p2p": p2p, "xids": fabric.parse_xids(log), "xid_count": len(fabric.parse_xids(log)),
           "xid_source": "dmesg", "errors": []}
    facts = {"state": "ok", "gpus": [{"index": i, "pci_bus_id": g["pci_bus_id"]} for i, g in enumerate(gpus)]}
    assert first == "00000000:06:00.0"
    return {"fabric": fab, "gpu": facts}


def h100_found(**over):
    gpus = fabric.smi_q_fabric(read(H100 / "nvidia-smi-q.txt"))
    params = {}
    for line in read(H100 / "module-params.txt").splitlines():
        path, _sep, value = line.partition(": ")
        if path.endswith("/uvm_disable_hmm"):
            params["nvidia_uvm.uvm_disable_hmm"] = fabric.module_param_value(value)
    fab = {"cmdline": read(H100 / "proc-cmdline.txt").strip(), "module_params": params, "gpus": gpus,
           "paths": {"0000:00:06.0": fabric.bridges_on_path(read(H100 / "gpu-sysfs.txt").split()[2])},
           "iommu_groups": {}, "bridges": {}, "p2p": fabric.parse_p2p_matrix(read(H100 / "topo-p2p-r.txt")),
           "xids": fabric.parse_xids(read(H100 / "dmesg-xid.txt")), "xid_count": 0, "xid_source": "dmesg",
           "errors": []}
    fab.update(over)
    return {"fabric": fab, "gpu": {"state": "ok", "gpus": [{"index": 0, "pci_bus_id": "00000000:00:06.0"}]}}


def checks(exp, found):
    return {c["name"]: c for c in verify.judge(exp, found, groups=["fabric"])}


def first_gpu_edit(text, old, new):
    """The capture with ``old`` replaced by ``new`` once, inside GPU 0's block only."""
    head, sep, rest = text.partition("\nGPU 00000000:07:00.0")
    assert old in head
    return head.replace(old, new, 1) + sep + rest


# --- parsers on the real captures

def test_smi_q_reads_every_gpu_of_the_eight_card_capture():
    gpus = fabric.smi_q_fabric(read(ASUS / "nvidia-smi-q.txt"))
    assert len(gpus) == 8
    assert {g["bar1_total_mib"] for g in gpus} == {131072}
    assert {(g["pcie_gen_max"], g["pcie_gen_current"], g["pcie_width_max"], g["pcie_width_current"])
            for g in gpus} == {(5, 1, 16, 16)}
    assert {g["mig_current"] for g in gpus} == {"Disabled"}
    assert gpus[0]["remapped_pending"] == "No" and gpus[0]["retired_pending"] is None


def test_smi_q_of_the_h100_and_the_truncated_rtx_capture():
    (h100,) = fabric.smi_q_fabric(read(H100 / "nvidia-smi-q.txt"))
    assert (h100["bar1_total_mib"], h100["pcie_gen_host_max"], h100["pcie_gen_device_max"]) == (131072, None, 5)
    rtx = fabric.smi_q_fabric(read(RTX / "nvidia-smi-q.txt"))[0]
    assert rtx["pci_bus_id"] == "00000000:01:00.0" and rtx["pcie_width_current"] == 16
    assert rtx["bar1_total_mib"] is None  # the capture ends before BAR1


def test_lspci_acs_of_the_bridges_on_a_gpus_path():
    root, upstream, downstream = (fabric.parse_lspci_acs(read(ASUS / LSPCI[b])) for b in ASUS_PATH)
    assert root["acs"] and downstream["acs"] and not upstream["acs"]
    assert root["ctl"]["ReqRedir"] is False and root["ctl"]["SrcValid"] is True
    assert downstream["ctl_line"].startswith("SrcValid+ TransBlk- ReqRedir- CmpltRedir-")


def test_iommu_mode_and_kernel_args():
    assert fabric.iommu_mode(read(ASUS / "proc-cmdline.txt"))["mode"] == "off"
    assert fabric.iommu_mode(read(H100 / "proc-cmdline.txt"))["mode"] == "unset"
    assert fabric.iommu_mode("ro intel_iommu=on iommu=pt")["mode"] == "pt"
    assert fabric.iommu_mode("ro amd_iommu=pt")["mode"] == "pt"
    assert fabric.iommu_mode("ro intel_iommu=on,sm_on")["mode"] == "translated"
    # what follows -- is init's, not the kernel's
    assert fabric.kernel_arg(read(H100 / "proc-cmdline.txt"), "pci") == "realloc=off"
    assert fabric.kernel_arg("ro -- iommu=pt", "iommu") is None


def test_p2p_matrices():
    assert fabric.parse_p2p_matrix(read(H100 / "topo-p2p-r.txt")) == {"gpus": ["GPU0"], "pairs": []}
    two = fabric.parse_p2p_matrix(read(P2P / "topo-p2p-rw-2x5090-gns.txt"))
    assert two["pairs"] == [["GPU0", "GPU1", "GNS"], ["GPU1", "GPU0", "GNS"]]
    json.dumps(two)  # a module's result is JSON
    assert fabric.parse_p2p_matrix("nvidia-smi: failed") is None


def test_xid_lines_as_dmesg_and_journalctl_print_them():
    xids = fabric.parse_xids(read(XID / "xid-79-154-open-gpu-kernel-modules-1151.txt"))
    assert [(x["pci"], x["xid"]) for x in xids] == [("0000:01:00", 79), ("0000:01:00", 154)]
    (j,) = fabric.parse_xids(read(XID / "xid-79-journal-open-gpu-kernel-modules-1151.txt"))
    assert (j["pci"], j["xid"], j["text"]) == ("0000:2b:00", 79, "GPU has fallen off the bus.")
    assert fabric.parse_xids(read(H100 / "dmesg-xid.txt")) == []


# --- the judge: each check passing on a real capture and failing on an edited copy

def test_the_real_eight_card_host_passes_what_it_has():
    got = checks(expected(iommu="off"), asus_found(p2p=fabric.parse_p2p_matrix(
        read(P2P / "topo-p2p-rw-2x5090-gns.txt").replace("GNS", "OK"))))
    failed = {n: c["found"] for n, c in got.items() if not c["ok"]}
    assert failed == {}
    assert got["acs_redirect"]["found"] == "off on all 3 bridges"
    assert got["bar1"]["found"] == "131072 MiB on every GPU"
    # idle cards run their links at Gen1: reported, not judged
    assert "now Gen1, P8" in got["pcie_link_generation"]["found"]


def test_the_real_h100_passes_with_its_one_gpu():
    got = checks(expected(), h100_found())
    assert {n for n, c in got.items() if not c["ok"]} == set()
    assert got["p2p_matrix"]["found"] == "one GPU: no pair"
    assert got["acs_redirect"]["found"] == "no bridge between the GPUs and their root complex"
    assert got["iommu_mode"]["found"].startswith("unset")


def test_a_narrowed_link_fails_naming_the_gpu():
    q = first_gpu_edit(read(ASUS / "nvidia-smi-q.txt"), "Current                                : 16x",
                       "Current                                : 8x")
    got = checks(expected(), asus_found(smi_q=q))
    assert not got["pcie_link_width"]["ok"]
    assert got["pcie_link_width"]["found"] == "GPU 0 (00000000:06:00.0): x8 of x16"
    assert got["pcie_link_generation"]["ok"]


def test_a_slot_capped_below_the_cards_generation_fails():
    q = read(ASUS / "nvidia-smi-q.txt")
    q = first_gpu_edit(q, "Max                                    : 5", "Max                                    : 4")
    q = first_gpu_edit(q, "Host Max                               : 5", "Host Max                               : 4")
    got = checks(expected(), asus_found(smi_q=q))
    assert not got["pcie_link_generation"]["ok"]
    assert got["pcie_link_generation"]["found"] == "GPU 0 (00000000:06:00.0): link max Gen4 (device Gen5, host Gen4)"


def test_acs_redirect_on_a_switch_port_fails_naming_the_gpu_and_the_bridge():
    text = read(ASUS / LSPCI["0000:02:03.0"]).replace("ACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir-",
                                                      "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+")
    got = checks(expected(), asus_found(lspci={"0000:02:03.0": text}))
    assert not got["acs_redirect"]["ok"]
    assert got["acs_redirect"]["found"] == "GPU 0 (00000000:06:00.0): bridge 0000:02:03.0 ACSCtl ReqRedir+ CmpltRedir+"
    assert "blackwell-pcie-acs.service" in got["acs_redirect"]["hint"]
    # bits left out of verify_fabric_acs_off are not judged (SrcValid+ stays on in the community's own fix)
    assert checks(expected(acs_off=["EgressCtrl"]), asus_found(lspci={"0000:02:03.0": text}))["acs_redirect"]["ok"]


def test_acs_that_lspci_cannot_read_without_root_fails():
    text = read(ASUS / LSPCI["0000:00:01.1"])
    start = text.index("\tCapabilities: [2a0 v1] Access Control Services")
    end = text.index("\n", text.index("ACSCtl:", start))
    text = text[:start] + "\tCapabilities: <access denied>" + text[end:]
    got = checks(expected(), asus_found(lspci={"0000:00:01.1": text}))
    assert not got["acs_redirect"]["ok"]
    assert "bridge 0000:00:01.1 ACS not readable" in got["acs_redirect"]["found"]


def test_a_bar1_without_resizable_bar_fails():
    q = first_gpu_edit(read(ASUS / "nvidia-smi-q.txt"), "Total                                          : 131072 MiB",
                       "Total                                          : 256 MiB")
    got = checks(expected(), asus_found(smi_q=q))
    assert not got["bar1"]["ok"] and got["bar1"]["found"] == "GPU 0 (00000000:06:00.0): 256 MiB"


def test_mig_on_fails():
    q = first_gpu_edit(read(ASUS / "nvidia-smi-q.txt"), "Current                                        : Disabled",
                       "Current                                        : Enabled")
    got = checks(expected(), asus_found(smi_q=q))
    assert not got["mig_mode"]["ok"] and got["mig_mode"]["found"] == "GPU 0 (00000000:06:00.0): Enabled"


def test_ecc_is_reported_and_a_pending_remap_fails():
    ok = checks(expected(), asus_found())["ecc"]
    assert ok["ok"] and ok["found"].startswith("GPU 0 (00000000:06:00.0): ECC Enabled, retired pages SBE N/A DBE N/A, "
                                               "remapped rows correctable 0 uncorrectable 0")
    q = first_gpu_edit(read(ASUS / "nvidia-smi-q.txt"), "Remapping Failure Occurred                     : No",
                       "Remapping Failure Occurred                     : Yes")
    got = checks(expected(), asus_found(smi_q=q))["ecc"]
    assert not got["ok"] and got["found"].startswith("GPU 0 (00000000:06:00.0): a row remapping failed")


def test_p2p_not_ok_fails_naming_both_gpus():
    got = checks(expected(), asus_found(p2p=fabric.parse_p2p_matrix(read(P2P / "topo-p2p-rw-2x5090-gns.txt"))))
    assert not got["p2p_matrix"]["ok"]
    assert got["p2p_matrix"]["found"].startswith("GPU 0 (00000000:06:00.0) -> GPU 1 (00000000:07:00.0): GNS")


def test_a_fallen_card_fails_and_other_xids_are_reported():
    rtx_gpu = {"state": "ok", "gpus": [{"index": 0, "pci_bus_id": "00000000:01:00.0"}]}
    fallen = h100_found(xids=fabric.parse_xids(read(XID / "xid-79-154-open-gpu-kernel-modules-1151.txt")),
                        xid_count=2)
    fallen["gpu"] = rtx_gpu
    got = checks(expected(), fallen)["xid"]
    assert not got["ok"]
    assert got["found"].startswith("Xid 79 on GPU 0 (00000000:01:00.0) x1: GPU has fallen off the bus.")
    remap = h100_found(xids=fabric.parse_xids(read(XID / "xid-63-ml-engineering.txt")), xid_count=1)
    got = checks(expected(), remap)["xid"]
    assert got["ok"] and got["found"].startswith("Xid 63 on GPU ? (0000:10:1c) x1: pid=1896, Row Remapper")


def test_the_kernel_command_line_and_module_parameters_as_the_driver_role_sets_them():
    h100 = h100_found()
    got = checks(expected(iommu="pt", module_params={"nvidia_uvm.uvm_disable_hmm": "Y"}), h100)
    assert not got["iommu_mode"]["ok"] and not got["module_param nvidia_uvm.uvm_disable_hmm"]["ok"]
    assert got["module_param nvidia_uvm.uvm_disable_hmm"]["found"] == "uvm_disable_hmm=N"
    fixed = h100_found(cmdline=h100["fabric"]["cmdline"].replace(" -- ", " iommu=pt pcie_aspm=off -- ", 1),
                       module_params={"nvidia_uvm.uvm_disable_hmm": "Y"})
    got = checks(expected(iommu="pt", module_params={"nvidia_uvm.uvm_disable_hmm": "1"},
                          kernel_args={"pcie_aspm": "off"}), fixed)
    assert got["iommu_mode"]["ok"] and got["module_param nvidia_uvm.uvm_disable_hmm"]["ok"]
    assert got["kernel_arg pcie_aspm"]["ok"]
    # a variable the driver role leaves off is not judged: no check
    assert "kernel_arg pcie_aspm" not in checks(expected(kernel_args={"pcie_aspm": ""}), fixed)
    # passthrough asked, but the GPU's DMA still translated
    trans = h100_found(cmdline="ro iommu=pt", iommu_groups={"0000:00:06.0": "DMA-FQ"})
    assert not checks(expected(iommu="pt"), trans)["iommu_mode"]["ok"]
    # a module that is not loaded cannot show its parameter
    gone = h100_found(module_params={"nvidia_uvm.uvm_disable_hmm": None})
    c = checks(expected(module_params={"nvidia_uvm.uvm_disable_hmm": "Y"}), gone)["module_param nvidia_uvm.uvm_disable_hmm"]
    assert not c["ok"] and "not loaded" in c["found"]


def test_not_gathered_and_unanswered():
    (c,) = verify.judge(expected(), {}, groups=["fabric"])
    assert (c["name"], c["ok"]) == ("fabric", False)
    got = checks(expected(), h100_found(gpus=[], p2p=None, errors=["nvidia-smi -q: no devices (rc=6)"]))
    assert not got["bar1"]["ok"] and got["bar1"]["found"] == "nvidia-smi -q: no devices (rc=6)"
    assert not got["p2p_matrix"]["ok"]


# --- gpu_facts gathers it in one call, reading only the GPUs' bridges

def test_lspci_paths_name_each_gpus_bridges_with_their_domain():
    text = ("0000:00:01.1/01:00.0/02:03.0/06:00.0 0302: 10de:2bb5 (rev a1)\n"
            "0000:80:01.1/81:00.0 0300: 10de:2bb5 (rev a1)\n0000:00:01.1/01:00.0/02:03.1/07:00.1 0403: 10de:22e8\n")
    assert fabric.parse_lspci_paths(text) == {"0000:06:00.0": ["0000:00:01.1", "0000:01:00.0", "0000:02:03.0"],
                                              "0000:81:00.0": ["0000:80:01.1"]}


def test_gpu_facts_gathers_the_fabric_reading_only_the_bridges_on_the_gpus_paths(tmp_path):
    from modrun import run_module
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    asked = tmp_path / "lspci-asked"
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f"case \"$*\" in\n"
        f"  --query-gpu=*) echo '0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-x, 00000000:06:00.0, "
        f"0x2BB510DE, 595.58.03, 12.0, 97887, Enabled' ;;\n"
        f"  -q) cat '{ASUS / 'nvidia-smi-q.txt'}' ;;\n"
        f"  'topo -p2p r') cat '{H100 / 'topo-p2p-r.txt'}' ;;\n"
        "  *) exit 2 ;;\nesac\n")
    lspci = bin_ / "lspci"
    # lspci -PP names the GPU's path as the real one does; -vvv -s <bridge> answers with the captures
    lspci.write_text("#!/bin/sh\nif [ \"$*\" = '-D -PP -n -d 10de:' ]; then\n"
                     "  echo '0000:00:01.1/01:00.0/02:03.0/06:00.0 0302: 10de:2bb5 (rev a1)'\n"
                     "  echo '0000:00:03.1/09:00.0 0108: 144d:a80a'\n  exit 0\nfi\n"
                     "echo \"$3\" >> '" + str(asked) + "'\ncase \"$3\" in\n"
                     + "".join(f"  {bdf}) cat '{ASUS / name}' ;;\n" for bdf, name in LSPCI.items())
                     + "  *) exit 1 ;;\nesac\n")
    dmesg = bin_ / "dmesg"
    dmesg.write_text(f"#!/bin/sh\ncat '{XID / 'xid-79-154-open-gpu-kernel-modules-1151.txt'}'\n")
    for f in (smi, lspci, dmesg):
        f.chmod(0o755)
    # sysfs: the GPU's directory under its bridges, and an NVMe drive elsewhere that must not be read
    devices = tmp_path / "devices" / "pci0000:00"
    gpu_dir = devices / "0000:00:01.1" / "0000:01:00.0" / "0000:02:03.0" / "0000:06:00.0"
    nvme_dir = devices / "0000:00:03.1" / "0000:09:00.0"
    pci = tmp_path / "pci"
    pci.mkdir()
    for d, vendor, klass in ((gpu_dir, "0x10de", "0x030200"), (nvme_dir, "0x144d", "0x010802")):
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor)
        (d / "device").write_text("0x2bb5")
        (d / "class").write_text(klass)
        (pci / d.name).symlink_to(d)
    (tmp_path / "cmdline").write_text(read(ASUS / "proc-cmdline.txt"))
    (tmp_path / "module" / "nvidia_uvm" / "parameters").mkdir(parents=True)
    (tmp_path / "module" / "nvidia_uvm" / "parameters" / "uvm_disable_hmm").write_text("Y\n")
    got = run_module("gpu_facts", {
        "nvidia_smi": str(smi), "proc_version_path": str(tmp_path / "no-proc"), "sysfs_pci_path": str(pci),
        "fabric": True, "module_params": ["nvidia_uvm.uvm_disable_hmm", "nvidia.NVreg_EnableResizableBar"],
        "proc_cmdline_path": str(tmp_path / "cmdline"), "sysfs_module_path": str(tmp_path / "module"),
        "lspci": str(lspci)}, env={"PATH": f"{bin_}{os.pathsep}/usr/bin:/bin"})
    fab = got["fabric"]
    assert fab["paths"] == {"0000:06:00.0": ASUS_PATH}
    assert sorted(asked.read_text().split()) == sorted(ASUS_PATH)
    assert fab["bridges"]["0000:01:00.0"]["acs"] is False and fab["bridges"]["0000:02:03.0"]["acs"] is True
    assert fab["module_params"] == {"nvidia_uvm.uvm_disable_hmm": "Y", "nvidia.NVreg_EnableResizableBar": None}
    assert len(fab["gpus"]) == 8 and fab["p2p"]["gpus"] == ["GPU0"]
    assert [x["xid"] for x in fab["xids"]] == [79, 154]
    assert fab["cmdline"].endswith("amd_iommu=off iommu=off")
    assert not got["changed"]
    found = {"gpu": got["ansible_facts"]["nvidia_gpu"], "fabric": fab}
    by = checks(expected(iommu="off"), found)
    assert not by["xid"]["ok"] and by["pcie_link_width"]["ok"] and by["acs_redirect"]["ok"]
    assert "fabric" not in run_module("gpu_facts", {"nvidia_smi": str(smi), "sysfs_pci_path": str(pci),
                                                    "proc_version_path": str(tmp_path / "no-proc")})


@pytest.mark.parametrize("name", ["fabric"])
def test_the_group_is_known(name):
    assert name in verify.GROUPS and name not in verify.STACK_GROUPS
