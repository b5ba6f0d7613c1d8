# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Judge what a host has against what the stack pins: one named check per fact.

Pure functions, no Ansible imports. ``judge(expected, found)`` returns a list
of checks, each ``{"name", "group", "ok", "expected", "found", "hint"}``; the
verify role gathers ``found`` with the collection's modules and a few read-only
probes, and asserts each check. Groups let a run select what it can judge
(``gpu`` on a machine with a GPU but no sglang, say).
"""
from __future__ import annotations

from ansible_collections.blackwell.serving.plugins.module_utils import fabric as fabric_text
from ansible_collections.blackwell.serving.plugins.module_utils import known_bad
from ansible_collections.blackwell.serving.plugins.module_utils.sglang_argv import SWITCHES, VALUED, parse_options

GROUPS = ("gpu", "cuda", "sglang", "service", "model", "fabric")
# what a judge of the host's stack makes unless asked: the model check needs the model's records
STACK_GROUPS = GROUPS[:4]
PACKAGES = ("flashinfer-python", "flashinfer-cubin", "transformers", "nvidia-cudnn-cu12")


def _int(value):
    """A whole number as it may come: ansible-core before 2.19 renders "{{ x | int }}" and "{{ r.status }}" inside a
    dictionary variable as text ("8", "200")."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _check(name, group, ok, expected, found, hint):
    return {"name": name, "group": group, "ok": bool(ok), "expected": expected, "found": found,
            "hint": "" if ok else hint}


def _gpu(expected, gpu):
    out = []
    state = gpu.get("state")
    if state != "ok":
        why = f"nvidia-smi did not answer ({state}: {gpu.get('message', '')})".strip()
        hint = ("A driver update waits for a reboot: reboot the host." if state == "version_mismatch" else
                "Install and load the driver (role nvidia_driver), then reboot if it says so.")
        for name in ("gpu_count", "gpu_name", "compute_capability", "kernel_module", "driver_version"):
            out.append(_check(name, "gpu", False, expected.get(name), why, hint))
        return out
    count, want = _int(gpu.get("count", 0)), _int(expected["gpu_count"])
    out.append(_check("gpu_count", "gpu", count == want, want, count,
                      "A GPU is missing or one too many is visible: check nvidia-smi -L, the PCIe slots and "
                      "CUDA_VISIBLE_DEVICES; or set verify_gpu_count to this host's count."))
    names = gpu.get("names") or []
    out.append(_check("gpu_name", "gpu", bool(names) and all(expected["gpu_name"] in n for n in names),
                      f"every GPU named like '{expected['gpu_name']}'", names,
                      "These are not the GPUs the stack was built for: set verify_gpu_name if that is intended."))
    caps = gpu.get("compute_capabilities") or []
    want = expected["compute_capability"]
    sm = "SM" + want.replace(".", "")
    out.append(_check("compute_capability", "gpu", caps == [want], want, caps,
                      f"The stack is pinned and tuned for compute capability {want} ({sm}); this host has "
                      f"{', '.join(caps) or 'none'}. Serve it with a stack built for that GPU, or set "
                      f"verify_compute_capability if you mean to."))
    module = gpu.get("kernel_module")
    out.append(_check("kernel_module", "gpu", module == expected["kernel_module"], expected["kernel_module"],
                      module, "Blackwell needs NVIDIA's open kernel modules: set nvidia_driver_kernel_modules=open "
                              "and run the nvidia_driver role, then reboot."))
    loaded = gpu.get("kernel_module_version")
    out.append(_check("driver_version", "gpu", loaded == expected["driver_version"], expected["driver_version"],
                      loaded, "The loaded driver is not the pinned one: run site.yml (role nvidia_driver) and "
                              "reboot, or re-pin nvidia_driver_version in the stack file."))
    # each GPU, as nvidia-smi reports it: the role enables persistence (nvidia-persistenced); a distribution's unit
    # that runs it with --no-persistence-mode leaves the driver to tear every GPU down between two users
    off = [f"GPU {g.get('index')} ({g.get('pci_bus_id')}): {g.get('persistence_mode') or 'unknown'}"
           for g in gpu.get("gpus") or [] if g.get("persistence_mode") != "Enabled"]
    if expected.get("persistence_mode", True) in (False, "False", "false"):
        return out
    out.append(_check("persistence_mode", "gpu", not off and bool(gpu.get("gpus")), "Enabled on every GPU",
                      "; ".join(off) or "Enabled on every GPU",
                      "Persistence is off where listed: run site.yml (role nvidia_driver starts nvidia-persistenced "
                      "without --no-persistence-mode), or nvidia-smi -pm 1 until it does."))
    return out


def _module_built(kernel, files):
    """A kernel whose NVIDIA module was never built (DKMS had no headers for it) brings the host up without GPUs."""
    built = [f for f in files if f.rsplit("/", 1)[-1].split(".ko")[0] == "nvidia"]
    return _check("kernel_module_built", "gpu", bool(built), f"nvidia.ko built for the running kernel {kernel}",
                  built or "none",
                  f"No NVIDIA module is built for kernel {kernel}: DKMS had no headers for it. Install the kernel "
                  "headers metapackage (role nvidia_driver does), run dkms autoinstall for this kernel, and reboot.")


def _cuda(expected, nvcc):
    found = nvcc.get("version") if nvcc else None
    release = nvcc.get("release") if nvcc else None
    want = expected["cuda_version"]
    want_release = ".".join(want.split(".")[:2])
    # nvcc names the release (12.9) and its own build (V12.9.86), not the toolkit's patch release (12.9.1)
    ok = release == want_release
    return [_check("cuda_toolkit", "cuda", ok, f"nvcc of CUDA {want} (release {want_release})",
                   f"release {release}, V{found}" if nvcc else "no nvcc",
                   "Run the cuda_toolkit role (site.yml) so that the pinned toolkit is installed.")]


def _sglang(expected, found):
    out = []
    sm = found.get("sm120") or {}
    if not sm or "error" in sm:
        out.append(_check("sm120_fix", "sglang", False, "the SM120 shared-memory fix (sglang #14311)",
                          sm.get("error") or "no sglang release to judge",
                          "Run the sglang role (site.yml) so that a release is in service."))
    elif sm.get("judge") == "none":
        # the compiler was asked and could not judge: never a pass
        out.append(_check("sm120_fix", "sglang", False, "the SM120 shared-memory fix (sglang #14311), judged by the "
                          "compiler", f"not judged by the compiler: {sm.get('compiler_error') or sm.get('reason')}",
                          "A release the compiler cannot judge is not proven to fit SM120's shared memory: pin a "
                          "commit the compiler can judge, or set sglang_sm120_judge: estimate in the stack file to "
                          "accept the estimate's verdict (" + str((sm.get("estimate") or {}).get("reason", "")) + ")."))
    else:
        fixed = sm.get("present") is True and sm.get("fix_commit_ancestor") is not False
        tiles = ", ".join(f"head {t.get('head_dim', t['head_size'])}: {t['BLOCK_M']}x{t['BLOCK_N']} = {t['smem_bytes']} B"
                          for t in sm.get("tiles") or [] if "BLOCK_M" in t)
        out.append(_check("sm120_fix", "sglang", fixed,
                          f"the SM120 shared-memory fix (sglang #14311, {expected['sm120_fix_commit'][:12]})",
                          f"{'present' if sm.get('present') else 'absent'} in {sm.get('file')}:{sm.get('line')}"
                          f" ({tiles or sm.get('reason')}; judged by the {sm.get('judge', 'estimate')})"
                          f"; fix commit an ancestor: {sm.get('fix_commit_ancestor')}",
                          "The release in service lacks the SM120 fix and can overflow shared memory on SM120: "
                          "pin an sglang_commit that contains it and run site.yml. " + str(sm.get("reason", ""))))
    native = found.get("native_libraries")
    if "native_libraries" in found:
        out.append(_native(found, native))
    head = sm.get("head") if sm else None
    out.append(_check("sglang_commit", "sglang", head == expected["sglang_commit"], expected["sglang_commit"], head,
                      "The release in service is not the pinned commit: run site.yml, or look for a rollback "
                      "(sglang_service rolls back a release that failed its health gate)."))
    pkgs = found.get("packages") or {}
    for name in PACKAGES:
        want = expected["packages"][name]
        have = pkgs.get(name)
        out.append(_check(f"package {name}", "sglang", have == want, want, have,
                          f"The release's environment has {name} {have}, not {want}: run site.yml (role "
                          f"sglang) to rebuild the release with the pins."))
    return out


def _service(expected, found):
    out = []
    state = found.get("unit_state")
    out.append(_check("unit_active", "service", state == "active", "active", state,
                      f"Start it (systemctl start {expected['unit']}) and read journalctl -u {expected['unit']}; "
                      f"or run site.yml."))
    current, deployed = found.get("current_release"), found.get("deployed_release")
    out.append(_check("release_in_service", "service", bool(current) and current == deployed,
                      f"the release current points at ({current})", deployed,
                      "The service runs another release than current (a change not restarted, or a rollback): "
                      "run site.yml."))
    for path, status in sorted((found.get("endpoints") or {}).items()):
        status = _int(status)
        out.append(_check(f"endpoint {path}", "service", status == 200, 200, status,
                          f"{path} did not answer 200: read journalctl -u {expected['unit']}."))
    chat = found.get("chat") or {}
    text = chat.get("content")
    ok, why = judge_text(text, chat.get("finish_reason"))
    out.append(_check("chat_completion", "service", _int(chat.get("status")) == 200 and ok,
                      "status 200, a finished non-empty readable answer",
                      f"status {chat.get('status')}, finish_reason {chat.get('finish_reason')}, "
                      f"text {text!r}"[:300] + ("" if ok else f" ({why})"),
                      "The server answers but what it computes is wrong: check --kv-cache-dtype bf16 and "
                      "--fp4-gemm-backend flashinfer_cudnn on SM120, and the journal."))
    if found.get("unit_text") is not None:
        out.append(_known_bad(expected, found))
    if found.get("router_membership"):
        out += _routers(found["router_membership"])
    return out


def _routers(membership):
    """This server in every router of the fleet (listed and healthy), and the routers' entries of no known server."""
    routers = membership.get("routers") or {}
    if not routers:
        return []  # no router in this run (a --limit that leaves them out): nothing asked, nothing to judge
    wrong = [f"{router}: " + (m["error"] or ("not listed" if not m["listed"] else "listed, not healthy"))
             for router, m in sorted(routers.items()) if m.get("error") or not (m["listed"] and m["healthy"])]
    out = [_check("router_membership", "service", not wrong, f"listed and healthy in {', '.join(sorted(routers))}",
                  "; ".join(wrong) or "listed and healthy everywhere",
                  "The server is out of a router (a drain that was not undone: an interrupted re-pin) or failing its "
                  "health checks there: run site.yml, whose router play puts every healthy server back.")]
    unknown = membership.get("unknown") or {}
    out.append(_check("router_entries", "service", not unknown, "every router entry a server of the inventory",
                      "; ".join(f"{r}: {', '.join(urls)}" for r, urls in sorted(unknown.items())) or "none other",
                      "A router balances servers the inventory does not name (a host removed from it, or added by "
                      "hand): remove them from the router, or add them to the inventory, then run site.yml."))
    return out


def _native(found, native):
    """The shared libraries the release's compiled extensions need, resolved as the loader will (sglang_probe)."""
    from ansible_collections.blackwell.serving.plugins.module_utils.native_libs import provider

    if not native:
        return _check("native_libraries", "sglang", False, "every library the server's extensions need, found",
                      "not read (no release environment)", "Run the sglang role (site.yml) so that a release is "
                      "in service.")
    missing = native.get("missing") or []
    said = "; ".join(f"{m['library']} (needed by {', '.join(m['needed_by'][:3])}"
                     f"{' and more' if len(m['needed_by']) > 3 else ''}; from {provider(m['library'])})"
                     for m in missing)
    return _check("native_libraries", "sglang", not missing,
                  f"every library the server's extensions need, found ({native.get('objects')} objects read)",
                  said or "all found",
                  "The server cannot import these extensions and dies at start: install what each line names "
                  "(site.yml installs the system's; a wheel's come with the release), then restart it.")


def server_settings(unit_text):
    """The server's options as the unit runs them ({settings key: value}, keys as the sglang_service variables
    without their prefix), read from the unit's text (with its drop-ins, as ``systemctl cat`` prints it)."""
    flags = unit_options(unit_text)["flags"]
    keys = dict(VALUED + SWITCHES)
    return {keys[flag]: value for flag, value in flags.items() if flag in keys}


def _known_bad(expected, found):
    """The known-bad table (module_utils/known_bad.py) against the options the unit runs, the GPUs' compute
    capability (as found, else as expected) and the release's packages."""
    caps = (found.get("gpu") or {}).get("compute_capabilities") or [expected["compute_capability"]]
    rows = known_bad.matches(str(caps[0]), server_settings(found["unit_text"]), found.get("packages") or {})
    return _check("known_bad", "service", not rows, "no combination of the known-bad table",
                  "; ".join(known_bad.describe(r) for r in rows) or "none",
                  "The server runs a combination known to crash, garble output or fail on these GPUs: change what "
                  "the row says, in the stack file or the inventory, and run site.yml.")


def _model(expected, found):
    """The weights against the snapshot's marker and the revision's manifest (module model_snapshot,
    state=checked): every file there, of its size, and of its content where it differs from its record (every
    file on a full re-hash)."""
    want = f"{expected['model_repo_id']}@{expected['model_revision'][:12]}: every file as its manifest says"
    if not found or found.get("complete") is None:
        return [_check("model_weights", "model", False, want, (found or {}).get("msg", "not checked"),
                       "The model could not be checked (see found): run site.yml (role model_weights).")]
    bad = []
    for key, what in (("wrong_hash", "wrong content"), ("wrong_size", "wrong size"), ("missing", "missing")):
        if found.get(key):
            bad.append(f"{what}: {', '.join(found[key])}")
    if not found.get("marker_matches_manifest"):
        bad.append("no snapshot marker of this revision, or it records another manifest")
    read = f"{len(found.get('hashed') or [])} of {found.get('files')} files read"
    ok = found["complete"] and not bad
    return [_check("model_weights", "model", ok, want,
                   f"{found.get('files')} files as recorded ({read})" if ok else "; ".join(bad) + f" ({read})",
                   "The host serves weights that are not the pinned revision's: run site.yml (role model_weights "
                   "fetches a file of wrong content again and restarts the server on it). Where site.yml finds "
                   "nothing (a file whose size and times are as recorded, as the disk's own decay leaves them), "
                   "remove the files named first. -e verify_model_rehash=true reads every file.")]


# --- fabric: the PCIe fabric between the GPUs and their health (gpu_facts' option fabric)

def _bus_key(bus_id):
    """'00000000:06:00.0' (nvidia-smi), '0000:06:00.0' (sysfs) and '0000:06:00' (an Xid) as (domain, bus, device),
    with the function where given."""
    text = str(bus_id or "").strip().lower()
    try:
        domain, bus, rest = text.split(":")
        dev, _sep, fn = rest.partition(".")
        return (int(domain, 16), int(bus, 16), int(dev, 16)) + ((int(fn, 16),) if fn else ())
    except ValueError:
        return (text,)


def _gpu_label(gpu_facts, bus_id, position=None):
    """'GPU 0 (00000000:06:00.0)': the index nvidia-smi gives the GPU at that bus id (else its place in the list)."""
    key = _bus_key(bus_id)[:3]
    for g in gpu_facts.get("gpus") or []:
        if _bus_key(g.get("pci_bus_id"))[:3] == key:
            return f"GPU {g.get('index')} ({g.get('pci_bus_id')})"
    return f"GPU {position if position is not None else '?'} ({bus_id})"


def _fabric(expected, fab, gpu_facts):
    """The fabric checks: kernel command line and module parameters as the driver role sets them, ACS redirect off on
    every bridge between a GPU and its root port, BAR1, PCIe link width and generation, the P2P matrix, MIG, ECC
    pages and rows, and Xids since boot."""
    if not fab:
        return [_check("fabric", "fabric", False, "the fabric's state, read by gpu_facts (fabric: true)",
                       "not gathered", "Run verify with the fabric group (verify_checks) so that gather.yml reads it.")]
    out = [_iommu(expected, fab)]
    cmdline = fab.get("cmdline") or ""
    for name, want in sorted((expected.get("kernel_args") or {}).items()):
        if want in (None, ""):
            continue
        have = fabric_text.kernel_arg(cmdline, name) if fab.get("cmdline") is not None else None
        out.append(_check(f"kernel_arg {name}", "fabric", have == str(want), f"{name}={want} on the kernel command "
                          f"line", "absent" if have is None else f"{name}={have}",
                          f"The running kernel was not booted with {name}={want}: run site.yml (role nvidia_driver "
                          f"writes it to the boot loader's configuration) and reboot the host."))
    params = fab.get("module_params") or {}
    for name, want in sorted((expected.get("module_params") or {}).items()):
        if want in (None, ""):
            continue
        have = params.get(name)
        mod, _sep, param = name.partition(".")
        out.append(_check(f"module_param {name}", "fabric", fabric_text.same_param(want, have),
                          f"{param}={want} on the loaded {mod}",
                          f"{mod} not loaded (/sys/module/{mod}/parameters/{param} absent)" if have is None else
                          f"{param}={have}",
                          f"{mod} runs without {param}={want}: run site.yml (role nvidia_driver writes the option to "
                          f"/etc/modprobe.d and rebuilds the initramfs) and reboot the host (a module in use is not "
                          f"reloaded)."))
    out.append(_acs(expected, fab, gpu_facts))
    gpus = fab.get("gpus") or []
    why = "; ".join(fab.get("errors") or []) or "nvidia-smi -q listed no GPU"
    if not gpus:
        for name in ("bar1", "pcie_link_width", "pcie_link_generation", "mig_mode", "ecc"):
            out.append(_check(name, "fabric", False, "every GPU's record in nvidia-smi -q", why,
                              "nvidia-smi -q did not answer: see the gpu group's checks (driver loaded, version)."))
    else:
        out += _smi_q_checks(expected, gpus, gpu_facts)
    out.append(_p2p(fab, gpu_facts))
    out.append(_xid(expected, fab, gpus, gpu_facts))
    return out


def _iommu(expected, fab):
    want = str(expected.get("iommu") or "any")
    if fab.get("cmdline") is None:
        return _check("iommu_mode", "fabric", want == "any", f"IOMMU {want}", "/proc/cmdline not read",
                      "The kernel command line could not be read: run verify as root.")
    mode = fabric_text.iommu_mode(fab["cmdline"])
    groups = {bdf: t for bdf, t in (fab.get("iommu_groups") or {}).items() if t}
    translated = sorted(bdf for bdf, t in groups.items() if t.startswith("DMA"))
    found = (f"{mode['mode']} ({' '.join(mode['args']) or 'no IOMMU argument'})"
             + (f"; GPUs' IOMMU groups: {', '.join(f'{b} {t}' for b, t in sorted(groups.items()))}" if groups else ""))
    if want == "any":
        return _check("iommu_mode", "fabric", True, "any (not pinned: nvidia_driver_iommu_passthrough is off)", found,
                      "")
    ok = mode["mode"] == want and not (want == "pt" and translated)
    arg = {"pt": "iommu=pt (amd_iommu=pt on AMD)", "off": "iommu=off", "unset": "no IOMMU argument"}.get(want, want)
    return _check("iommu_mode", "fabric", ok, f"IOMMU {want}: {arg} on the kernel command line", found,
                  f"The running kernel's IOMMU is not in mode {want}"
                  + (f" (the GPUs' DMA is still translated: {', '.join(translated)})" if translated else "")
                  + ": run site.yml (role nvidia_driver writes the boot loader's configuration) and reboot the host; "
                    "check that no other file under /etc/default/grub.d sets another IOMMU mode.")


def _acs(expected, fab, gpu_facts):
    """ACS redirect on the bridges between each GPU and its root port: a bridge that redirects peer requests sends
    every P2P transfer up to the root complex (NCCL hangs or halves its bandwidth; nccl#2079, nccl#1999)."""
    bits = list(expected.get("acs_off") or [])
    paths = fab.get("paths") or {}
    bridges = fab.get("bridges") or {}
    want = (f"{', '.join(b + '-' for b in bits)} in ACSCtl of every bridge between a GPU and its root port"
            if bits else "not judged (verify_fabric_acs_off is empty)")
    if not bits:
        return _check("acs_redirect", "fabric", True, want, f"{len(bridges)} bridges on the GPUs' paths", "")
    bad, unread, seen = [], [], 0
    for pos, (gpu, path) in enumerate(sorted(paths.items())):
        label = _gpu_label(gpu_facts, gpu, pos)
        for bdf in path:
            b = bridges.get(bdf) or {"error": "not read"}
            seen += 1
            if b.get("error") or (not b.get("readable", True)):
                unread.append(f"{label}: bridge {bdf} {b.get('error') or 'ACS not readable (lspci without root)'}")
            elif b.get("acs"):
                on = [bit for bit in bits if (b.get("ctl") or {}).get(bit)]
                if on:
                    bad.append(f"{label}: bridge {bdf} ACSCtl {' '.join(bit + '+' for bit in on)}")
    if not paths:
        return _check("acs_redirect", "fabric", False, want, "no NVIDIA GPU on the PCI bus (lspci, sysfs)",
                      "No GPU was found on the PCI bus: see the gpu group's checks (and that pciutils is installed).")
    ok = not bad and not unread
    found = "; ".join(bad + unread) or (f"off on all {len(bridges)} bridges" if bridges else
                                        "no bridge between the GPUs and their root complex")
    return _check("acs_redirect", "fabric", ok, want, found,
                  "ACS redirects peer-to-peer requests between the GPUs up to the root complex, where NCCL's P2P "
                  "transfers hang or run at half speed: run site.yml (nvidia_driver_pcie_acs_off: the boot unit "
                  "blackwell-pcie-acs.service clears them, now and at every boot), or turn ACS off in the BIOS"
                  + (". lspci could read no ACS without root: run verify with become." if unread else "."))


def _smi_q_checks(expected, gpus, gpu_facts):
    out = []
    labels = [_gpu_label(gpu_facts, g["pci_bus_id"], i) for i, g in enumerate(gpus)]
    floor = _int(expected.get("bar1_min_mib") or 0)
    small = [f"{lab}: {g.get('bar1_total_mib')} MiB" for lab, g in zip(labels, gpus)
             if not isinstance(g.get("bar1_total_mib"), int) or g["bar1_total_mib"] < floor]
    sizes = sorted({g.get("bar1_total_mib") for g in gpus if isinstance(g.get("bar1_total_mib"), int)})
    out.append(_check("bar1", "fabric", not small, f"BAR1 total of at least {floor} MiB on every GPU",
                      "; ".join(small) or f"{', '.join(str(s) for s in sizes)} MiB on every GPU",
                      "The GPU's BAR1 cannot map its memory: enable Resizable BAR and Above 4G Decoding in the BIOS "
                      "(and keep the VBIOS's resizable BAR), then reboot; P2P and GPUDirect go through BAR1."))
    narrow = [f"{lab}: x{g.get('pcie_width_current')} of x{g.get('pcie_width_max')}" for lab, g in zip(labels, gpus)
              if g.get("pcie_width_current") is None or g.get("pcie_width_current") != g.get("pcie_width_max")]
    widths = sorted({g.get("pcie_width_current") for g in gpus if g.get("pcie_width_current")})
    out.append(_check("pcie_link_width", "fabric", not narrow, "every GPU's link at its maximum width",
                      "; ".join(narrow) or f"x{', x'.join(str(w) for w in widths)} on every GPU",
                      "A link trained narrower than the card and slot allow (a riser, a cable, a slot wired or set "
                      "in the BIOS for fewer lanes, or a failing link): reseat the card and its cables, check the "
                      "slot's bifurcation setting, and reboot; the listed GPU moves every byte at that fraction."))
    capped = []
    for lab, g in zip(labels, gpus):
        dev = g.get("pcie_gen_device_max") or g.get("pcie_gen_max")
        if g.get("pcie_gen_max") is None or dev is None or g["pcie_gen_max"] < dev:
            capped.append(f"{lab}: link max Gen{g.get('pcie_gen_max')} (device Gen{g.get('pcie_gen_device_max')}, "
                          f"host Gen{g.get('pcie_gen_host_max')})")
    states = sorted({(g.get("pcie_gen_max"), g.get("pcie_gen_current"), g.get("performance_state")) for g in gpus},
                    key=str)
    gens = (f"Gen{states[0][0]} on every GPU (now Gen{states[0][1]}, {states[0][2]})" if len(states) == 1 else
            "; ".join(f"{lab} Gen{g.get('pcie_gen_max')} (now Gen{g.get('pcie_gen_current')}, "
                      f"{g.get('performance_state')})" for lab, g in zip(labels, gpus)))
    out.append(_check("pcie_link_generation", "fabric", not capped,
                      "every GPU's link able to run at the card's own maximum generation (an idle GPU's current "
                      "generation drops to save power and is reported, not judged)",
                      "; ".join(capped) or gens,
                      "The slot or the BIOS caps the link below the card's generation (a PCIe speed set in the "
                      "BIOS, a riser or retimer of an older generation): set the slot to Auto or Gen5 and reboot."))
    mig = [f"{lab}: {g.get('mig_current')}" for lab, g in zip(labels, gpus)
           if g.get("mig_current") not in (None, "Disabled")]
    out.append(_check("mig_mode", "fabric", not mig, "MIG Disabled (or not supported) on every GPU",
                      "; ".join(mig) or "Disabled or N/A on every GPU",
                      "MIG splits the GPU into instances that NCCL and the server cannot use whole: nvidia-smi -i "
                      "INDEX -mig 0, then reset the GPU or reboot."))
    bad, said = [], []
    for lab, g in zip(labels, gpus):
        said.append(f"{lab}: ECC {g.get('ecc_current') or 'N/A'}"
                    + (f" (pending {g['ecc_pending']})" if g.get("ecc_pending") not in (None, g.get("ecc_current"))
                       else "")
                    + f", retired pages SBE {g.get('retired_sbe') or 'N/A'} DBE {g.get('retired_dbe') or 'N/A'}"
                    + f", remapped rows correctable {g.get('remapped_correctable') or 'N/A'} uncorrectable "
                      f"{g.get('remapped_uncorrectable') or 'N/A'}")
        why = [what for key, what in (("retired_pending", "a page pending retirement"),
                                      ("remapped_pending", "a row pending remapping"),
                                      ("remapped_failure", "a row remapping failed"))
               if str(g.get(key) or "").lower() == "yes"]
        if why:
            bad.append(f"{lab}: {', '.join(why)}")
    out.append(_check("ecc", "fabric", not bad, "no page pending retirement, no row pending remapping, no remapping "
                      "failure (ECC state, retired pages and remapped rows reported)",
                      "; ".join(bad + said) if bad else "; ".join(said),
                      "A pending retirement or remapping takes effect at the GPU's next reset: drain the host, reset "
                      "the GPU (nvidia-smi -r -i INDEX) or reboot; a remapping failure means the card is out of spare "
                      "rows: replace it."))
    return out


def _p2p(fab, gpu_facts):
    matrix = fab.get("p2p")
    if matrix is None:
        return _check("p2p_matrix", "fabric", False, "OK between every pair of GPUs (nvidia-smi topo -p2p r)",
                      "; ".join(e for e in fab.get("errors") or [] if "topo" in e) or "not read",
                      "nvidia-smi topo -p2p r did not answer: see the gpu group's checks.")
    by_index = {f"GPU{g.get('index')}": g.get("pci_bus_id") for g in gpu_facts.get("gpus") or []}
    bad = [f"GPU {a[3:]} ({by_index.get(a, '?')}) -> GPU {b[3:]} ({by_index.get(b, '?')}): {status}"
           for a, b, status in sorted(matrix["pairs"]) if status != "OK"]
    n = len(matrix["gpus"])
    return _check("p2p_matrix", "fabric", not bad, "OK between every pair of GPUs (nvidia-smi topo -p2p r)",
                  "; ".join(bad) or (f"OK between all {n * (n - 1)} ordered pairs of {n} GPUs" if n > 1 else
                                     "one GPU: no pair"),
                  "The driver refuses peer-to-peer reads between these GPUs (CNS: chipset, GNS: GPU, TNS: topology, "
                  "NS: not supported, DR: disabled by a registry key): check the IOMMU mode, ACS and the BIOS's "
                  "PCIe settings; NCCL then falls back to copies through host memory.")


def _xid(expected, fab, gpus, gpu_facts):
    """Xids since boot: those of a fallen or broken card fail the host; the others are reported."""
    fatal = {_int(x) for x in expected.get("xid_fatal") or []}
    xids = fab.get("xids") or []
    source = fab.get("xid_source")
    action = [f"{_gpu_label(gpu_facts, g['pci_bus_id'], i)}: recovery action {g['recovery_action']}"
              for i, g in enumerate(gpus) if g.get("recovery_action")]
    if source is None and not xids:
        return _check("xid", "fabric", False, "no Xid of a fallen card since boot", "; ".join(
            e for e in fab.get("errors") or [] if "dmesg" in e or "journalctl" in e) or "kernel log not read",
            "The kernel log could not be read: run verify as root (dmesg_restrict).")
    seen = {}
    for x in xids:
        key = (x["xid"], x["pci"])
        seen.setdefault(key, [0, x["text"]])[0] += 1
    said = [f"Xid {xid} on {_gpu_label(gpu_facts, pci)} x{n}: {text[:120]}" for (xid, pci), (n, text) in seen.items()]
    bad = [s for s, (xid, _pci) in zip(said, seen) if xid in fatal] + action
    total = fab.get("xid_count", len(xids))
    ok = not bad
    found = ("; ".join(bad) if bad else "; ".join(said) or "none") + f" ({total} Xid lines in {source or 'the log'})"
    return _check("xid", "fabric", ok, f"no Xid of a fallen or broken card since boot ({', '.join(str(x) for x in sorted(fatal))}), "
                  "no recovery action pending; other Xids reported",
                  found,
                  "A GPU fell off the bus or its memory or firmware failed: drain the host, read the kernel log "
                  "(journalctl -k -b | grep -A5 Xid), reboot; if it comes back, reseat the card and check its power "
                  "cables, temperature and the PSU (Xid 79 at high power and temperature), or replace it.")


def judge_text(text, finish_reason):
    """Whether a completion is non-empty, finished and readable text rather than garbage."""
    if not isinstance(text, str) or not text.strip():
        return False, "empty"
    if finish_reason not in ("stop", "length"):
        return False, f"did not finish (finish_reason {finish_reason!r})"
    printable = sum(1 for c in text if c.isprintable() or c in "\n\t")
    if printable < 0.95 * len(text):
        return False, "unprintable characters"
    stripped = text.strip()
    if "\ufffd" in stripped or stripped.lower() in ("nan", "inf"):
        return False, "not text"
    if len(stripped) >= 8 and len(set(stripped)) <= 2:
        return False, "one character repeated"
    return True, ""


def judge(expected, found, groups=STACK_GROUPS):
    """All checks of the groups asked for."""
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown check groups {sorted(unknown)}; known: {', '.join(GROUPS)}")
    checks = []
    if "gpu" in groups:
        checks += _gpu(expected, found.get("gpu") or {"state": "not gathered"})
        if found.get("kernel_module_files") is not None:
            checks.append(_module_built(found.get("kernel"), found["kernel_module_files"]))
    if "cuda" in groups:
        checks += _cuda(expected, found.get("nvcc"))
    if "sglang" in groups:
        checks += _sglang(expected, found)
    if "service" in groups:
        checks += _service(expected, found)
    if "model" in groups:
        checks += _model(expected, found.get("model"))
    if "fabric" in groups:
        checks += _fabric(expected.get("fabric") or {}, found.get("fabric"), found.get("gpu") or {})
    return checks


def failures(host, checks):
    """One line for each failed check of a host: what was expected, what was found, and what to do."""
    lines = []
    for c in checks:
        if not c["ok"]:
            found = "nothing" if c["found"] is None else c["found"]
            lines.append(f"{host}: check {c['name']} failed: expected {c['expected']}, found {found}. "
                         f"{c.get('hint') or ''}".strip())
    return lines


def table(reports):
    """A plain-text table of {host: [checks]}: one line per host and check."""
    rows = [("host", "check", "result", "expected", "found")]
    for host in sorted(reports):
        checks = reports[host]
        if not checks:
            rows.append((host, "-", "NO REPORT", "", "the host did not get this far"))
        for c in checks or []:
            rows.append((host, c["name"], "pass" if c["ok"] else "FAIL", _short(c["expected"]), _short(c["found"])))
    return _format(rows)


def _format(rows):
    """Rows of strings as aligned lines (the last column left ragged), a rule under the header row."""
    last = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(last)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) for j in range(last)) + "  " + r[last])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(r[last]))
    return lines


def _short(value, width=60):
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= width else text[:width - 3] + "..."


# --- drift: what a host has that the stack file does not say

def unit_options(text):
    """The command-line options and Environment= settings of a systemd unit's text.

    Returns ``{"exec": [program, module], "flags": {"--flag": "value" or True}, "environment": {NAME: value}}``;
    a unit's line continuations are joined and the quotes of systemd's quoting removed; the flags are read as
    ``sglang_argv.parse_options`` reads the command line the unit template joins.
    """
    import shlex

    lines = []
    for raw in (text or "").splitlines():
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        else:
            lines.append(raw.strip())
    env, words = {}, []
    for line in lines:
        if line.startswith("Environment="):
            for item in shlex.split(line[len("Environment="):]):
                name, value = item.split("=", 1) if "=" in item else (item, "")
                env[name] = value
        elif line.startswith("ExecStart="):
            words = shlex.split(line[len("ExecStart="):])
    program = []
    for word in words:
        if word.startswith("--"):
            break
        program.append(word)
    return {"exec": program, "flags": parse_options(words), "environment": env}


def unit_parts(text):
    """[(path, text)] of what ``systemctl cat`` prints: the unit's file, then each drop-in, each after its
    ``# /path`` line; text without such lines is one part with no path."""
    parts, path, lines = [], None, []
    for line in (text or "").splitlines():
        if line.startswith("# /") and (line.endswith(".service") or line.endswith(".conf")):
            if path is not None or lines:
                parts.append((path, "\n".join(lines)))
            path, lines = line[2:].strip(), []
        else:
            lines.append(line)
    if path is not None or lines:
        parts.append((path, "\n".join(lines)))
    return parts


def unit_drift(expected_text, found_text):
    """Differences between the unit the stack file renders and the one systemd runs (its file and drop-ins, as
    ``systemctl cat`` prints them): [{item, expected, found}], with the drop-ins that change a flag, the program or
    the environment named."""
    if not found_text:
        return [{"item": "unit", "expected": "installed", "found": None}]
    exp, got = unit_options(expected_text), unit_options(found_text)
    out = []
    for key, label in (("flags", "unit flag "), ("environment", "unit environment ")):
        for name in sorted(set(exp[key]) | set(got[key])):
            e, f = exp[key].get(name), got[key].get(name)
            if e != f:
                out.append({"item": label + name, "expected": e, "found": f})
    if exp["exec"] != got["exec"]:
        out.append({"item": "unit program", "expected": " ".join(exp["exec"]), "found": " ".join(got["exec"])})
    parts = unit_parts(found_text)
    if len(parts) > 1:
        base = parts[0][1]
        changing = [path for path, body in parts[1:] if unit_options(base + "\n" + body) != unit_options(base)]
        if changing:
            out.append({"item": "unit drop-ins", "expected": "none that change what the stack file decides",
                        "found": changing})
    return out


def drift(checks, unit=None, model=None, routers=None):
    """A host's drift: the failed checks of verify's judge, the unit's differences, the model's revision, and its
    place in the routers.

    ``checks`` as ``judge`` returns them; ``unit`` as ``unit_drift`` returns it; ``model`` is
    ``{"expected": revision, "found": revision or None}``; ``routers`` as the router_membership filter returns it.
    Returns ``[{item, expected, found}]``, empty when the host is what the stack file says.
    """
    checks = list(checks) + (_routers(routers) if routers else [])
    out = [{"item": c["name"], "expected": c["expected"], "found": c["found"]} for c in checks if not c["ok"]]
    out += list(unit or [])
    if model and model.get("expected") != model.get("found"):
        out.append({"item": "model revision", "expected": model.get("expected"), "found": model.get("found")})
    return out


def drift_table(reports):
    """A plain-text table of {host: [differences]}: one line per difference; hosts in sync say so."""
    rows = [("host", "differs in", "stack file says", "host has")]
    for host in sorted(reports):
        diffs = reports[host]
        if diffs is None:
            rows.append((host, "-", "", "NO REPORT: the host did not get this far"))
            continue
        if not diffs:
            rows.append((host, "(nothing)", "", "in sync"))
        for d in diffs:
            rows.append((host, d["item"], _short(d["expected"]), _short(d["found"])))
    lines = _format(rows)
    drifted = sorted(h for h, d in reports.items() if d)
    lines.append(f"{len(drifted)} of {len(reports)} host(s) differ from the stack file"
                 + (": " + ", ".join(drifted) if drifted else "."))
    return lines
