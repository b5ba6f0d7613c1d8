"""host_state: a phase holds only when every thing it would change is as it would leave it.

Each test starts from a host where the phase holds, changes one thing, and expects exactly that difference.
"""
import grp
import os
import pwd

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import host_state as hs

from modrun import run_module

# dpkg-query -W -f '${binary:Package}\t${Version}\t${Status}\n' on a converged lab host (shape as captured)
DPKG = (
    "nvidia-driver-cuda\t580.95.05-1\thold ok installed\n"
    "nvidia-kernel-open-dkms\t580.95.05-1\thold ok installed\n"
    "libnvidia-compute:amd64\t580.95.05-1\thold ok installed\n"
    "nvidia-driver-pinning-580.95.05\t1.0\tinstall ok installed\n"
    "linux-headers-amd64\t6.1.158-1\tinstall ok installed\n"
    "cuda-toolkit-12-9\t12.9.1-1\thold ok installed\n"
    "cuda-nvcc-12-9\t12.9.86-1\thold ok installed\n"
    "nvidia-old-gone\t570.1.1-1\tdeinstall ok config-files\n"
)
ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def driver_spec():
    return {
        "packages": [{"name": "nvidia-driver-cuda", "version": "580.95.05-1", "held": True},
                     {"name": "nvidia-kernel-open-dkms", "version": "580.95.05-1", "held": True},
                     {"name": "linux-headers-amd64"},
                     {"name": "nvidia-driver-pinning-580.95.05", "state": "offered", "version": "1.0"}],
        "patterns": [{"match": "^(nvidia-|libnvidia-)", "exclude": "^nvidia-driver-pinning-",
                      "version": "580.95.05-1", "held": True}],
    }


def test_parse_dpkg_drops_architecture_and_reads_selection():
    got = hs.parse_dpkg(DPKG)
    assert got["libnvidia-compute"] == {"version": "580.95.05-1", "selection": "hold", "state": "installed"}
    assert got["nvidia-old-gone"]["state"] == "config-files"


def test_converged_packages_hold():
    assert hs.judge(driver_spec(), hs.parse_dpkg(DPKG), {}) == []


@pytest.mark.parametrize("line, replacement, expect", [
    ("nvidia-driver-cuda\t580.95.05-1\thold", "nvidia-driver-cuda\t580.82.07-1\thold",
     "package nvidia-driver-cuda is at 580.82.07-1, not 580.95.05-1"),
    ("nvidia-kernel-open-dkms\t580.95.05-1\thold", "nvidia-kernel-open-dkms\t580.95.05-1\tinstall",
     "package nvidia-kernel-open-dkms is not held (install)"),
    # a package the pattern matches, named nowhere else: at another version, or not held
    ("libnvidia-compute:amd64\t580.95.05-1\thold", "libnvidia-compute:amd64\t580.82.07-1\thold",
     "package libnvidia-compute is at 580.82.07-1, not 580.95.05-1"),
    ("libnvidia-compute:amd64\t580.95.05-1\thold", "libnvidia-compute:amd64\t580.95.05-1\tinstall",
     "package libnvidia-compute is not held (install)"),
    ("linux-headers-amd64\t6.1.158-1\tinstall ok installed", "linux-headers-amd64\t6.1.158-1\tdeinstall ok config-files",
     "package linux-headers-amd64 is not installed"),
])
def test_one_package_differs(line, replacement, expect):
    assert line in DPKG
    assert hs.judge(driver_spec(), hs.parse_dpkg(DPKG.replace(line, replacement)), {}) == [expect]


def test_offered_package_missing_counts_only_when_offered():
    dpkg = hs.parse_dpkg("\n".join(ln for ln in DPKG.splitlines() if "pinning" not in ln))
    asked = []
    assert hs.judge(driver_spec(), dpkg, {}, lambda n, v: asked.append((n, v)) or False) == []
    assert asked == [("nvidia-driver-pinning-580.95.05", "1.0")]
    assert hs.judge(driver_spec(), dpkg, {}, lambda n, v: True) == [
        "package nvidia-driver-pinning-580.95.05 is offered and not installed"]


@pytest.mark.parametrize("have, ok", [("580.95.05-0ubuntu1", True), ("580.95.05-1ubuntu1", True),
                                      ("580.95.05-1", True), ("580.82.07-0ubuntu1", False), ("580.95.050-1", False)])
def test_a_version_glob_holds_the_release_at_any_packaging_revision(have, ok):
    """Ubuntu's suffix is the repository's (-0ubuntu1, -1ubuntu1): the pin and the state read name the release."""
    spec = {"packages": [{"name": "nvidia-utils-580", "version": "580.95.05-*", "held": True}],
            "patterns": [{"match": "^libnvidia-", "version": "580.95.05-*", "held": True}]}
    dpkg = hs.parse_dpkg(f"nvidia-utils-580\t{have}\thold ok installed\nlibnvidia-compute-580\t{have}\thold ok installed\n")
    diffs = hs.judge(spec, dpkg, {})
    assert diffs == ([] if ok else [f"package nvidia-utils-580 is at {have}, not 580.95.05-*",
                                    f"package libnvidia-compute-580 is at {have}, not 580.95.05-*"])


def test_missing_named_package():
    dpkg = hs.parse_dpkg("\n".join(ln for ln in DPKG.splitlines() if not ln.startswith("nvidia-driver-cuda")))
    assert hs.judge(driver_spec(), dpkg, {}) == ["package nvidia-driver-cuda is not installed"]


@pytest.fixture
def files(tmp_path):
    pref = tmp_path / "pref"
    pref.write_text("Pin: version 580.95.05-1\n")
    pref.chmod(0o644)
    (tmp_path / "keyrings").mkdir(mode=0o755)
    (tmp_path / "keyrings").chmod(0o755)
    (tmp_path / "cuda").symlink_to("/usr/local/cuda-12.9")
    spec = {"files": [
        {"path": str(pref), "content": "Pin: version 580.95.05-1\n", "owner": ME, "group": MY_GROUP, "mode": "0644"},
        {"path": str(tmp_path / "keyrings"), "state": "directory", "owner": ME, "group": MY_GROUP, "mode": "0755"},
        {"path": str(tmp_path / "cuda"), "state": "link", "src": "/usr/local/cuda-12.9"},
        {"path": str(tmp_path / "uvm.conf"), "state": "absent"},
    ]}
    return tmp_path, spec


def test_converged_files_hold(files):
    _, spec = files
    assert hs.judge(spec, {}, {}) == []


def test_file_content_differs_by_one_byte(files):
    tmp, spec = files
    (tmp / "pref").write_text("Pin: version 580.95.05-1 \n")
    assert hs.judge(spec, {}, {}) == [f"{tmp}/pref differs in content"]


def test_file_mode_differs(files):
    tmp, spec = files
    (tmp / "pref").chmod(0o600)
    assert hs.judge(spec, {}, {}) == [f"{tmp}/pref has mode 0600, not 0644"]


def test_file_owner_and_group_differ(files):
    tmp, spec = files
    spec["files"][0].update(owner="nobody-else", group="nogroup-else")
    assert hs.judge(spec, {}, {}) == [f"{tmp}/pref is owned by {ME}, not nobody-else",
                                      f"{tmp}/pref has group {MY_GROUP}, not nogroup-else"]


def test_file_missing_or_not_a_file(files):
    tmp, spec = files
    (tmp / "pref").unlink()
    (tmp / "pref").mkdir()
    assert hs.judge(spec, {}, {}) == [f"{tmp}/pref is not a regular file"]
    (tmp / "pref").rmdir()
    assert hs.judge(spec, {}, {}) == [f"{tmp}/pref is missing"]


def test_absent_file_present(files):
    tmp, spec = files
    (tmp / "uvm.conf").write_text("options nvidia_uvm uvm_disable_hmm=1\n")
    assert hs.judge(spec, {}, {}) == [f"{tmp}/uvm.conf exists"]


def test_link_to_another_target_or_a_file(files):
    tmp, spec = files
    (tmp / "cuda").unlink()
    (tmp / "cuda").symlink_to("/usr/local/cuda-12.8")
    assert hs.judge(spec, {}, {}) == [f"{tmp}/cuda points at /usr/local/cuda-12.8, not /usr/local/cuda-12.9"]
    (tmp / "cuda").unlink()
    (tmp / "cuda").write_text("")
    assert hs.judge(spec, {}, {}) == [f"{tmp}/cuda is not a symbolic link"]


def test_link_without_target_is_any_link(tmp_path):
    """A link wanted with no src holds for any target (a release link another role switches), and only for a link."""
    (tmp_path / "current").symlink_to("/opt/sglang/releases/abc")
    spec = {"files": [{"path": str(tmp_path / "current"), "state": "link"}]}
    assert hs.judge(spec, {}, {}) == []
    (tmp_path / "current").unlink()
    (tmp_path / "current").mkdir()
    assert hs.judge(spec, {}, {}) == [f"{tmp_path}/current is not a symbolic link"]
    (tmp_path / "current").rmdir()
    assert hs.judge(spec, {}, {}) == [f"{tmp_path}/current is missing"]


def test_directory_mode_differs(files):
    tmp, spec = files
    (tmp / "keyrings").chmod(0o700)
    assert hs.judge(spec, {}, {}) == [f"{tmp}/keyrings has mode 0700, not 0755"]


SHOW = """Id=nvidia-persistenced.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled
NeedDaemonReload=no

Id=nvidia-devices.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled
NeedDaemonReload=no
"""
UNITS = {"units": [{"name": "nvidia-persistenced.service", "enabled": True, "active": True},
                   {"name": "nvidia-devices.service", "enabled": True}]}


def test_converged_units_hold():
    assert hs.judge(UNITS, {}, hs.parse_systemctl_show(SHOW)) == []


@pytest.mark.parametrize("old, new, expect", [
    ("ActiveState=active\nUnitFileState=enabled\nNeedDaemonReload=no\n\nId=nvidia-devices",
     "ActiveState=inactive\nUnitFileState=enabled\nNeedDaemonReload=no\n\nId=nvidia-devices",
     "unit nvidia-persistenced.service is inactive, not active"),
    ("UnitFileState=enabled\nNeedDaemonReload=no\n\nId=nvidia-devices",
     "UnitFileState=disabled\nNeedDaemonReload=no\n\nId=nvidia-devices",
     "unit nvidia-persistenced.service is disabled, not enabled"),
    ("UnitFileState=enabled\nNeedDaemonReload=no\n", "UnitFileState=enabled\nNeedDaemonReload=yes\n",
     "unit nvidia-persistenced.service changed on disk since systemd loaded it"),
    ("Id=nvidia-devices.service\nLoadState=loaded", "Id=nvidia-devices.service\nLoadState=not-found",
     "unit nvidia-devices.service is not loaded (not-found)"),
])
def test_one_unit_differs(old, new, expect):
    assert old in SHOW
    assert hs.judge(UNITS, {}, hs.parse_systemctl_show(SHOW.replace(old, new, 1))) == [expect]


def test_unit_wanted_disabled_is_strict():
    units = hs.parse_systemctl_show(SHOW.replace("UnitFileState=enabled", "UnitFileState=static", 1))
    assert hs.judge({"units": [{"name": "nvidia-persistenced.service", "enabled": False}]}, {}, units) == [
        "unit nvidia-persistenced.service is static, not disabled"]


def test_module_reads_files_and_says_what_differs(tmp_path):
    (tmp_path / "a").write_text("x\n")
    got = run_module("host_state", {"files": [{"path": str(tmp_path / "a"), "content": "x\n"},
                                              {"path": str(tmp_path / "b"), "state": "absent"}]})
    assert got["holds"] is True and got["changed"] is False and got["differences"] == []
    got = run_module("host_state", {"files": [{"path": str(tmp_path / "a"), "content": "y\n"}]})
    assert got["holds"] is False and got["differences"] == [f"{tmp_path}/a differs in content"]


def test_one_entry_names_several_packages():
    spec = {"packages": [{"name": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"], "version": "580.95.05-1",
                          "held": True}]}
    assert hs.judge(spec, hs.parse_dpkg(DPKG), {}) == []
    dpkg = DPKG.replace("nvidia-kernel-open-dkms\t580.95.05-1\thold", "nvidia-kernel-open-dkms\t580.95.05-1\tinstall")
    assert hs.judge(spec, hs.parse_dpkg(dpkg), {}) == ["package nvidia-kernel-open-dkms is not held (install)"]


def test_module_reads_this_machines_packages():
    # dpkg itself is installed on any Debian-family machine that runs these tests
    got = run_module("host_state", {"packages": [{"name": ["dpkg"]}],
                                    "patterns": [{"match": "^dpkg$"}]})
    assert got["holds"] is True, got
    assert set(got["installed"]) == {"dpkg"}
    got = run_module("host_state", {"packages": [{"name": ["dpkg", "no-such-package-here"]}]})
    assert got["differences"] == ["package no-such-package-here is not installed"]


def test_exists_follows_links(tmp_path):
    (tmp_path / "python").symlink_to("/usr/bin/python3")
    assert hs.judge({"files": [{"path": str(tmp_path / "python"), "state": "exists"}]}, {}, {}) == []
    (tmp_path / "python").unlink()
    (tmp_path / "python").symlink_to(str(tmp_path / "gone"))
    assert hs.judge({"files": [{"path": str(tmp_path / "python"), "state": "exists"}]}, {}, {}) == [
        f"{tmp_path}/python is missing"]


def test_users_and_groups():
    me = pwd.getpwuid(os.getuid())
    spec = {"groups": [{"name": MY_GROUP}],
            "users": [{"name": ME, "group": grp.getgrgid(me.pw_gid).gr_name, "home": me.pw_dir, "shell": me.pw_shell}]}
    assert hs.judge(spec, {}, {}) == []
    spec["users"][0]["shell"] = "/usr/sbin/nologin-not"
    assert hs.judge(spec, {}, {}) == [f"user {ME} has shell {me.pw_shell}, not /usr/sbin/nologin-not"]
    spec["users"][0].update(shell=me.pw_shell, home="/nowhere")
    assert hs.judge(spec, {}, {}) == [f"user {ME} has home {me.pw_dir}, not /nowhere"]
    spec["users"][0].update(home=me.pw_dir, group="no-such-group-x")
    assert hs.judge(spec, {}, {}) == [f"user {ME} has primary group {grp.getgrgid(me.pw_gid).gr_name}, not no-such-group-x"]
    assert hs.judge({"users": [{"name": "no-such-user-x"}], "groups": [{"name": "no-such-group-x"}]}, {}, {}) == [
        "group no-such-group-x is missing", "user no-such-user-x is missing"]


def test_package_wanted_absent():
    spec = {"packages": [{"name": ["cuda-keyring"], "state": "absent"}]}
    assert hs.judge(spec, hs.parse_dpkg(DPKG), {}) == []
    assert hs.judge(spec, hs.parse_dpkg(DPKG + "cuda-keyring\t1.1-1\tinstall ok installed\n"), {}) == [
        "package cuda-keyring is installed"]
    # removed, its configuration left: nothing of it is in use
    assert hs.judge(spec, hs.parse_dpkg(DPKG + "cuda-keyring\t1.1-1\tdeinstall ok config-files\n"), {}) == []


def test_absent_lines(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "nvidia-cuda.sources").write_text("URIs: https://repo/compute/cuda/repos/debian12/x86_64/\n")
    (d / "debian.sources").write_text("URIs: http://deb.debian.org/debian\n")
    (d / "old.list").write_text("# deb https://repo/compute/cuda/repos/debian12/x86_64/ /\n")
    spec = {"absent_lines": [{"paths": [str(d / "*.list"), str(d / "*.sources"), str(tmp_path / "sources.list")],
                              "regex": r"^(?!\s*#).*compute/cuda/repos/debian12/x86_64/?(\s|$)",
                              "except": [str(d / "nvidia-cuda.sources")]}]}
    assert hs.judge(spec, {}, {}) == []
    (d / "old.list").write_text("deb [signed-by=/x] https://repo/compute/cuda/repos/debian12/x86_64/ /\n")
    assert hs.judge(spec, {}, {}) == [f"{d}/old.list has a line matching {spec['absent_lines'][0]['regex']}"]
    (d / "old.list").unlink()
    (tmp_path / "sources.list").write_text("deb http://deb.debian.org/debian bookworm main\n"
                                           "deb https://repo/compute/cuda/repos/debian12/x86_64 /\n")
    assert hs.judge(spec, {}, {}) == [f"{tmp_path}/sources.list has a line matching {spec['absent_lines'][0]['regex']}"]


def test_static_unit_counts_as_enabled_and_masked_does_not():
    want = {"units": [{"name": "nvidia-persistenced.service", "enabled": True}]}
    assert hs.judge(want, {}, hs.parse_systemctl_show(SHOW.replace("UnitFileState=enabled", "UnitFileState=static", 1))) == []
    assert hs.judge(want, {}, hs.parse_systemctl_show(SHOW.replace("UnitFileState=enabled", "UnitFileState=masked", 1))) == [
        "unit nvidia-persistenced.service is masked, not enabled"]


def test_enabled_for_this_boot_only_does_not_hold():
    # systemd_service makes an enabled-runtime unit enabled for good: a change the phase must make
    want = {"units": [{"name": "nvidia-persistenced.service", "enabled": True}]}
    show = SHOW.replace("UnitFileState=enabled", "UnitFileState=enabled-runtime", 1)
    assert hs.judge(want, {}, hs.parse_systemctl_show(show)) == [
        "unit nvidia-persistenced.service is enabled-runtime, not enabled"]


def test_stopped_holds_only_when_nothing_runs():
    want = {"units": [{"name": "nvidia-persistenced.service", "active": False}]}
    for state, holds in (("inactive", True), ("failed", True), ("activating", False), ("deactivating", False),
                         ("active", False)):
        show = SHOW.replace("ActiveState=active", f"ActiveState={state}", 1)
        assert (hs.judge(want, {}, hs.parse_systemctl_show(show)) == []) is holds, state


def test_read_path_reports_what_stat_would(tmp_path):
    """read: unjudged, in the stat module's names (lnk_source resolved as stat resolves it), for the deploy sequence."""
    import hashlib
    (tmp_path / "releases" / "abc").mkdir(parents=True)
    (tmp_path / "current").symlink_to("releases/abc")
    (tmp_path / "unit").write_text("[Service]\n")
    (tmp_path / "started.json").write_text('{"unit": "x"}\n')
    got = hs.read_path({"path": str(tmp_path / "current"), "checksum": True})
    assert got == {"exists": True, "isreg": False, "isdir": False, "islnk": True, "lnk_target": "releases/abc",
                   "lnk_source": str(tmp_path / "releases" / "abc")}
    got = hs.read_path({"path": str(tmp_path / "unit"), "checksum": True})
    assert got["checksum"] == hashlib.sha256(b"[Service]\n").hexdigest() and "content" not in got
    assert hs.read_path({"path": str(tmp_path / "started.json"), "content": True})["content"] == '{"unit": "x"}\n'
    assert hs.read_path({"path": str(tmp_path / "gone"), "checksum": True, "content": True}) == {"exists": False}
    # a directory has no checksum, as stat gives none
    assert "checksum" not in hs.read_path({"path": str(tmp_path / "releases"), "checksum": True})


def test_read_path_lists_a_directory_when_asked(tmp_path):
    """entries: what find (recurse false, hidden true) would list, unfollowed, with mtime, in the same round trip."""
    import os
    (tmp_path / "revs" / "a").mkdir(parents=True)
    (tmp_path / "revs" / ".hidden").mkdir()
    (tmp_path / "revs" / "f").write_text("x")
    (tmp_path / "revs" / "l").symlink_to("a")
    os.utime(tmp_path / "revs" / "a", (1000, 1000))
    got = hs.read_path({"path": str(tmp_path / "revs"), "entries": True})
    assert sorted(got["entries"]) == [".hidden", "a", "f", "l"]
    assert got["entries"]["a"] == {"path": str(tmp_path / "revs" / "a"), "isdir": True, "isreg": False, "islnk": False,
                                   "mtime": 1000.0}
    assert got["entries"]["l"]["islnk"] and not got["entries"]["l"]["isdir"]
    assert got["entries"]["f"]["isreg"] and got["entries"][".hidden"]["isdir"]
    # not asked, not listed; a missing directory, a file and a link to a directory have no entries
    assert "entries" not in hs.read_path({"path": str(tmp_path / "revs")})
    assert hs.read_path({"path": str(tmp_path / "gone"), "entries": True}) == {"exists": False}
    assert "entries" not in hs.read_path({"path": str(tmp_path / "revs" / "f"), "entries": True})
    assert "entries" not in hs.read_path({"path": str(tmp_path / "revs" / "l"), "entries": True})


def test_read_path_refuses_a_large_file_as_text(tmp_path, monkeypatch):
    monkeypatch.setattr(hs, "READ_CONTENT_MAX", 4)
    (tmp_path / "big").write_text("12345")
    with pytest.raises(ValueError):
        hs.read_path({"path": str(tmp_path / "big"), "content": True})
    # the checksum covers the whole file, not only what fits as text
    import hashlib
    assert hs.read_path({"path": str(tmp_path / "big"), "checksum": True})["checksum"] == hashlib.sha256(b"12345").hexdigest()


def test_read_path_judges_a_snapshot_marker_when_asked(tmp_path):
    """snapshot: what a model snapshot's marker records, judged as model_snapshot judges it before it asks the Hub
    (every file as recorded when its content last matched); no file is read for its content."""
    import hashlib
    import json
    import os

    from ansible_collections.blackwell.serving.plugins.module_utils import snapshot

    root = tmp_path / "rev"
    root.mkdir()
    data = b"\x01" * 4096
    (root / "w.safetensors").write_bytes(data)
    manifest = snapshot.normalise_manifest([{"path": "w.safetensors", "size": len(data), "oid": "0" * 40,
                                             "lfs": {"oid": hashlib.sha256(data).hexdigest()}}])
    judged = snapshot.judge(str(root), manifest, verify=True)
    (root / snapshot.MARKER).write_text(snapshot.marker_content("org/m", "a" * 40, manifest, judged["records"]))

    def read():
        return hs.read_path({"path": str(root), "snapshot": True})["snapshot"]

    assert read() == {"repo_id": "org/m", "revision": "a" * 40, "complete": True}
    assert "snapshot" not in hs.read_path({"path": str(root)})
    # touched back to its old time: its change time tells
    st = os.stat(root / "w.safetensors")
    os.utime(root / "w.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert read()["complete"] is False
    (root / snapshot.MARKER).write_text(json.dumps({"revision": "a" * 40}))
    assert read() == {"repo_id": None, "revision": "a" * 40, "complete": False}
    (root / snapshot.MARKER).write_text("{not json")
    assert read() is None
    (root / snapshot.MARKER).unlink()
    assert read() is None
    got = run_module("host_state", {"read": [{"paths": [str(root), str(tmp_path / "gone")], "snapshot": True}]})
    assert got["paths"][str(root)]["snapshot"] is None and "snapshot" not in got["paths"][str(tmp_path / "gone")], got


def test_module_returns_paths_read_and_units(tmp_path):
    (tmp_path / "a").write_text("x\n")
    got = run_module("host_state", {"read": [{"paths": [str(tmp_path / "a")], "content": True},
                                             {"paths": [str(tmp_path / "b")]}]})
    assert got["holds"] is True, got
    assert got["paths"] == {str(tmp_path / "a"): {"exists": True, "isreg": True, "isdir": False, "islnk": False,
                                                  "content": "x\n"},
                            str(tmp_path / "b"): {"exists": False}}
    assert got["units"] == {}


def test_module_runs_read_only_commands_in_order(tmp_path):
    got = run_module("host_state", {"commands": [{"argv": ["sh", "-c", "echo $X; echo err >&2; exit 3"],
                                                  "environment": {"X": "hello"}},
                                                 {"argv": [str(tmp_path / "no-such-nvcc"), "--version"]}]})
    assert got["holds"] is True and got["changed"] is False, got
    first, second = got["commands"]
    assert (first["rc"], first["stdout"], first["stderr"]) == (3, "hello\n", "err\n")
    # a binary that is not there is an answer (rc 2), not a failure of the read
    assert second["rc"] == 2 and "no-such-nvcc" in second["stderr"] and second["stdout"] == ""


def test_the_processes_listening_on_a_port_are_named_with_their_unit():
    import socket
    from ansible_collections.blackwell.serving.plugins.module_utils import host_state as hs
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as six, socket.socket() as four:
        four.bind(("127.0.0.1", 0))
        four.listen()
        port = four.getsockname()[1]
        found = hs.listeners([port, port + 1 if port < 65535 else port - 1])
        mine = found[port]
        assert [p["pid"] for p in mine] == [os.getpid()]
        assert mine[0]["command"] and "unit" in mine[0]
        assert list(found.values())[1] == []
        six.bind(("::1", 0))
        six.listen()
        port6 = six.getsockname()[1]
        assert [p["pid"] for p in hs.listeners([port6])[port6]] == [os.getpid()]


def test_the_unit_of_a_process_is_read_from_its_cgroup():
    from ansible_collections.blackwell.serving.plugins.module_utils import host_state as hs
    assert hs._unit_of("0::/system.slice/ssh.service\n") == "ssh.service"
    assert hs._unit_of("12:pids:/system.slice/sglang.service\n1:name=systemd:/system.slice/sglang.service\n") == \
        "sglang.service"
    assert hs._unit_of("0::/user.slice/user-0.slice/session-3.scope\n") == "session-3.scope"
    assert hs._unit_of("0::/\n") is None
