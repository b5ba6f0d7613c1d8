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

from ansible_collections.blackwell.serving.plugins.module_utils import known_bad
from ansible_collections.blackwell.serving.plugins.module_utils.sglang_argv import SWITCHES, VALUED, parse_options

GROUPS = ("gpu", "cuda", "sglang", "service", "model")
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
