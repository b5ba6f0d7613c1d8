"""The stand-in NVIDIA repository: real names and versions, signed, replaying the captures."""
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


def test_branch_metapackage_is_no_pin(repo):
    # as upstream: cuda-drivers-580 accepts any newer driver, 590 included (STACK.md)
    dep = stanzas(repo)[("cuda-drivers-580", "580.95.05-1")]["Depends"]
    assert dep == "nvidia-driver (>= 580.65.06)"


def test_toolkit_does_not_pull_the_driver(repo):
    dep = stanzas(repo)[("cuda-toolkit-12-9", "12.9.1-1")]["Depends"]
    assert "nvidia" not in dep and "cuda-drivers" not in dep


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
