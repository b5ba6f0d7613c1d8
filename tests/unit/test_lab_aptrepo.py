"""The stand-in NVIDIA repository: real names and versions, signed, replaying the captures."""
import re
import subprocess

import pytest

from lab import aptrepo


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return aptrepo.build(tmp_path_factory.mktemp("www"))


def stanzas(repo):
    out = {}
    for block in (repo / "Packages").read_text().strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out[(fields["Package"], fields["Version"])] = fields
    return out


def test_pinned_older_and_newer_versions_are_there(repo):
    pk = stanzas(repo)
    for ver in ("580.82.07-1", "580.95.05-1", "580.105.08-1", "590.48.01-1"):
        for name in ("nvidia-open", "nvidia-driver", "nvidia-kernel-open-dkms", "nvidia-smi", "libcuda1"):
            assert (name, ver) in pk
    for name, ver in [("cuda-toolkit-12-9", "12.9.0-1"), ("cuda-toolkit-12-9", "12.9.1-1"),
                      ("cuda-toolkit-12-8", "12.8.1-1"), ("cuda-toolkit-13-0", "13.0.2-1")]:
        assert (name, ver) in pk


def test_branch_metapackage_is_no_pin_and_pulls_the_proprietary_module(repo):
    # as upstream (STACK.md): cuda-drivers-580 accepts any newer driver, 590 included, and needs the desktop set, the
    # compute set, the proprietary kernel module and NVIDIA's tools, each of which the repository has
    pk = stanzas(repo)
    dep = pk[("cuda-drivers-580", "580.95.05-1")]["Depends"]
    assert dep == ", ".join(f"{n} (>= 580.65.06)" for n in ("nvidia-driver", "nvidia-driver-cuda", "nvidia-kernel-dkms",
                                                             "nvidia-settings", "nvidia-xconfig"))
    for name in ("nvidia-settings", "nvidia-xconfig", "nvidia-kernel-dkms"):
        assert (name, "580.95.05-1") in pk


def test_the_kernel_module_packages_need_a_dkms_that_the_repository_serves(repo):
    # NVIDIA's DKMS packages need dkms >= 3.1.8 (bookworm has 3.0.10) and its repository ships one (STACK.md)
    pk = stanzas(repo)
    for flavour in ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms"):
        assert "dkms (>= 3.1.8)" in pk[(flavour, "580.95.05-1")]["Depends"]
    dkms = [version for (name, version) in pk if name == "dkms"]
    assert dkms and all(subprocess.run(["dpkg", "--compare-versions", v, "ge", "3.1.8"]).returncode == 0
                        for v in dkms)


def test_the_kernel_module_packages_ship_a_module_source_dkms_builds(repo, tmp_path):
    # a real module source for DKMS: its dkms.conf names the modules the Kbuild file builds, at the package's
    # version, and the postinst hands it to DKMS as dh_dkms does
    deb = next(repo.glob("nvidia-kernel-open-dkms_580.95.05-1_*.deb"))
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tmp_path)], check=True)
    src = tmp_path / "usr/src/nvidia-580.95.05"
    conf = (src / "dkms.conf").read_text()
    assert 'PACKAGE_NAME="nvidia"' in conf and 'PACKAGE_VERSION="580.95.05"' in conf
    built = re.findall(r'BUILT_MODULE_NAME\[\d\]="([^"]+)"', conf)
    assert sorted(f"{m}.o" for m in built) == sorted((src / "Kbuild").read_text().split("+=")[1].split())
    assert all((src / f"{m}.c").is_file() and 'MODULE_VERSION("580.95.05")' in (src / f"{m}.c").read_text()
               for m in built)
    assert "/usr/lib/dkms/common.postinst nvidia 580.95.05" in (tmp_path / "DEBIAN/postinst").read_text()


def test_toolkit_does_not_pull_the_driver(repo):
    dep = stanzas(repo)[("cuda-toolkit-12-9", "12.9.1-1")]["Depends"]
    assert "nvidia" not in dep and "cuda-drivers" not in dep


def test_the_toolkit_config_packages_own_the_stable_path_as_upstream(repo, tmp_path):
    # as NVIDIA's repository (read on a host with 13.0): cudart pulls three config packages, and the release's
    # own registers /usr/local/cuda and /usr/local/cuda-X as alternatives, priority XY, removed again on remove
    pk = stanzas(repo)
    assert pk[("cuda-cudart-12-9", "12.9.1-1")]["Depends"] == (
        "cuda-toolkit-config-common, cuda-toolkit-12-config-common, cuda-toolkit-12-9-config-common")
    assert pk[("cuda-toolkit-12-9-config-common", "12.9.1-1")]["Architecture"] == "all"
    assert ("cuda-toolkit-12-9-config-common", "12.9.0-1") in pk
    assert ("cuda-toolkit-config-common", "13.0.2-1") in pk and ("cuda-toolkit-12-config-common", "12.9.1-1") in pk
    deb = repo / pk[("cuda-toolkit-13-0-config-common", "13.0.2-1")]["Filename"]
    subprocess.run(["dpkg-deb", "-e", str(deb), str(tmp_path / "ctl")], check=True)
    postinst = (tmp_path / "ctl/postinst").read_text()
    assert "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130\n" in postinst
    assert "update-alternatives --install /usr/local/cuda-13 cuda-13 /usr/local/cuda-13.0 130\n" in postinst
    assert "        update-alternatives --remove cuda /usr/local/cuda-13.0\n" in (tmp_path / "ctl/postrm").read_text()
    shared = repo / pk[("cuda-toolkit-13-config-common", "13.0.2-1")]["Filename"]
    listing = subprocess.run(["dpkg-deb", "-c", str(shared)], capture_output=True, text=True, check=True).stdout
    assert "./etc/ld.so.conf.d/987_cuda-13.conf" in listing


def test_release_is_signed_by_the_published_key(repo, tmp_path):
    keyring = tmp_path / "k.gpg"
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", str(keyring), str(repo / aptrepo.KEY_FILE)], check=True)
    ok = subprocess.run(["gpgv", "--keyring", str(keyring), str(repo / "InRelease")], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    tampered = tmp_path / "InRelease"
    tampered.write_text((repo / "InRelease").read_text().replace("Packages", "Packagez", 1))
    assert subprocess.run(["gpgv", "--keyring", str(keyring), str(tampered)], capture_output=True).returncode != 0


def test_packages_index_matches_the_files(repo):
    import hashlib
    for (name, _), fields in stanzas(repo).items():
        data = (repo / fields["Filename"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == fields["SHA256"], name


def test_nvidia_smi_package_carries_the_captures(repo, tmp_path):
    deb = repo / "nvidia-smi_580.95.05-1_amd64.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    smi = (tmp_path / "usr/bin/nvidia-smi").read_text()
    assert 'LIB_VERSION = "580.95.05"' in smi
    assert (tmp_path / "usr/share/lab-standin/nvidia-smi/nvidia-smi-q.txt").is_file()


# --- the real dependency shape (issue 12): what apt does with it ---------------------------------------------

# dkms's dependencies, which Debian's archive serves
DEBIAN_BASE = ("kmod", "dpkg-dev", "make", "patch")


def dkms_from_the_repository(inst):
    """The install's dkms (NVIDIA's repository's, newer than bookworm's), taken out of an Inst map."""
    version = inst.pop("dkms")
    assert subprocess.run(["dpkg", "--compare-versions", version, "ge", "3.1.8"]).returncode == 0, version
    return version


def apt_sandbox(tmp_path, repo, sources_line=None, prefs=""):
    """apt 2.6 of this machine, reading only the stand-in repository, on a dpkg database that has only the Debian
    packages dkms needs (a Debian host has them from its own archive, which the sandbox does not read)."""
    root = tmp_path / "root"
    for d in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "var/lib/apt/lists/partial",
              "var/cache/apt/archives/partial", "var/lib/dpkg"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "var/lib/dpkg/status").write_text("".join(
        f"Package: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0-debian\n"
        "Maintainer: Debian\nDescription: a package of Debian's archive\n\n"
        for name in DEBIAN_BASE))
    (root / "etc/apt/sources.list").write_text(sources_line or f"deb [trusted=yes] file:{repo} /\n")
    (root / "etc/apt/preferences.d/test.pref").write_text(prefs)
    opts = [f"-oDir={root}", f"-oDir::State::status={root}/var/lib/dpkg/status", "-oDebug::NoLocking=1",
            "-oAPT::Architecture=amd64", "-oAPT::Get::Show-Versions=1"]

    def apt(*args):
        return subprocess.run(["apt-get", *opts, *args], capture_output=True, text=True)
    return root, apt


def test_desktop_metapackage_pins_x_and_gl_at_its_exact_version(repo):
    dep = stanzas(repo)[("nvidia-driver", "580.95.05-1")]["Depends"]
    for name in ("xserver-xorg-video-nvidia", "nvidia-driver-libs", "nvidia-alternative", "nvidia-vdpau-driver"):
        assert f"{name} (= 580.95.05-1)" in dep
    libs = stanzas(repo)[("nvidia-driver-libs", "580.95.05-1")]["Depends"]
    for name in ("libgl1-nvidia-glvnd-glx", "libglx-nvidia0", "libegl-nvidia0"):
        assert f"{name} (= 580.95.05-1)" in libs


def test_exact_desktop_pin_fails_once_590_is_in_the_repository(repo, tmp_path):
    # the case 2, as apt 2.6.1 says it: today's install line cannot be satisfied
    _, apt = apt_sandbox(tmp_path, repo)
    assert apt("update").returncode == 0
    names = ["nvidia-open", "nvidia-driver", "nvidia-kernel-open-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1",
             "nvidia-persistenced", "firmware-nvidia-gsp"]
    out = apt("-s", "install", *[f"{n}=580.95.05-1" for n in names])
    assert out.returncode != 0
    assert re.search(r"Depends: \S+ \(= 580\.95\.05-1\) but 590\.48\.01-1 is to be installed", out.stdout), out.stdout


def test_compute_only_set_installs_at_the_exact_version_without_x_or_gl(repo, tmp_path):
    _, apt = apt_sandbox(tmp_path, repo, prefs=(
        # the driver role's pin: the release at the repository's packaging revision (a glob, as apt reads it)
        "Package: nvidia-* libnvidia-* libcuda* firmware-nvidia-*\nPin: version 580.95.05-*\nPin-Priority: 1001\n"))
    assert apt("update").returncode == 0
    out = apt("-s", "install", "nvidia-driver-pinning-580.95.05=580.95.05-1", "nvidia-driver-cuda=580.95.05-1",
              "nvidia-kernel-open-dkms=580.95.05-1")
    assert out.returncode == 0, out.stdout + out.stderr
    inst = dict(re.findall(r"^Inst (\S+) \((\S+)", out.stdout, re.M))
    dkms_from_the_repository(inst)
    assert {"nvidia-smi", "libcuda1", "nvidia-persistenced", "nvidia-modprobe", "firmware-nvidia-gsp",
            "nvidia-kernel-support"} <= inst.keys()
    assert set(inst.values()) == {"580.95.05-1"}, inst
    assert not [n for n in inst if re.match(r"(xserver-|libgl|libglx|libegl|nvidia-driver$|nvidia-alternative)", n)]


def test_without_a_pin_even_the_compute_set_cannot_be_had_at_an_older_release(repo, tmp_path):
    # apt takes the candidate (590) for every dependency it is not told about: a pin is what makes 580 possible
    _, apt = apt_sandbox(tmp_path, repo)
    apt("update")
    out = apt("-s", "install", "nvidia-driver-cuda=580.95.05-1", "nvidia-kernel-open-dkms=580.95.05-1")
    assert out.returncode != 0
    assert "libcuda1 (= 580.95.05-1) but 590.48.01-1 is to be installed" in out.stdout


def test_pinning_packages_for_version_and_branch(repo, tmp_path):
    pk = stanzas(repo)
    for name in ("nvidia-driver-pinning-580.95.05", "nvidia-driver-pinning-580", "nvidia-driver-pinning-590",
                 "nvidia-driver-pinning-590.48.01"):
        assert any(n == name for n, _ in pk), name
    deb = repo / "nvidia-driver-pinning-580.95.05_580.95.05-1_all.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    pref = (tmp_path / "etc/apt/preferences.d/nvidia-driver-pinning").read_text()
    assert "Pin: version 580.95.05-*" in pref


def test_pinning_package_alone_holds_a_dist_upgrade_at_its_release(repo, tmp_path):
    root, apt = apt_sandbox(tmp_path, repo)
    deb = repo / "nvidia-driver-pinning-580.95.05_580.95.05-1_all.deb"
    x = tmp_path / "x"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(x)], check=True)
    (root / "etc/apt/preferences.d/test.pref").write_text(
        (x / "etc/apt/preferences.d/nvidia-driver-pinning").read_text())
    apt("update")
    out = apt("-s", "install", "nvidia-driver-cuda", "nvidia-kernel-open-dkms")
    inst = dict(re.findall(r"^Inst (\S+) \((\S+)", out.stdout, re.M))
    dkms_from_the_repository(inst)
    assert inst and set(inst.values()) == {"580.95.05-1"}, out.stdout


def test_cuda_keyring_is_laid_out_like_nvidias(repo, tmp_path):
    deb = repo / "cuda-keyring_1.1-1_all.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    entry = (tmp_path / "etc/apt/sources.list.d/cuda-debian12-x86_64.list").read_text()
    assert entry == f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {aptrepo.REPO_URL} /\n"
    keyring = tmp_path / "usr/share/keyrings/cuda-archive-keyring.gpg"
    # a binary keyring that verifies the repository's signature
    ok = subprocess.run(["gpgv", "--keyring", str(keyring), str(repo / "InRelease")], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    listed = subprocess.run(["gpg", "--batch", "--with-colons", "--show-keys", str(keyring)],
                            capture_output=True, text=True, check=True).stdout
    assert f"fpr:::::::::{aptrepo.key_fingerprint()}:" in listed


def test_two_entries_for_one_uri_with_different_signed_by_break_apt(repo, tmp_path):
    # the case 1, with this machine's apt: cuda-keyring's entry plus another Signed-By for the URI
    lines = (f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] file:{repo} /\n"
             f"deb [signed-by=/etc/apt/keyrings/nvidia-cuda.asc] file:{repo} /\n")
    _, apt = apt_sandbox(tmp_path, repo, sources_line=lines)
    out = apt("update")
    assert out.returncode != 0
    assert "Conflicting values set for option Signed-By" in out.stderr


def test_the_distribution_archive_serves_a_branch_named_driver_at_exact_versions(repo, tmp_path):
    """Issue 32: a host's distribution driver (Ubuntu's headless 550 shape) from an archive that is not NVIDIA's,
    signed with the same lab key; every package of the set needs the others at exactly its version."""
    www = repo.parents[len(aptrepo.REPO_PATH.split("/")) - 1]
    archive = www / aptrepo.ARCHIVE_PATH
    pk = stanzas(archive)
    branch, version = aptrepo.ARCHIVE_DRIVER
    assert pk[(f"nvidia-headless-{branch}", version)]["Depends"] == (
        f"nvidia-dkms-{branch} (= {version}), nvidia-headless-no-dkms-{branch} (= {version})")
    assert f"nvidia-kernel-common-{branch} (= {version})" in pk[(f"nvidia-dkms-{branch}", version)]["Depends"]
    # every name matches the driver role's pin globs (nvidia-*, libnvidia-*), none is NVIDIA's repository's name
    nvidia = {name for name, _ in stanzas(repo)}
    assert all(re.match(r"^(nvidia-|libnvidia-)", name) and name not in nvidia for name, _ in pk)
    keyring = tmp_path / "k.gpg"
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", str(keyring), str(repo / aptrepo.KEY_FILE)], check=True)
    ok = subprocess.run(["gpgv", "--keyring", str(keyring), str(archive / "InRelease")], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    assert "Origin: Lab stand-in" in (archive / "Release").read_text()
