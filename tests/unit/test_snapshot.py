"""Judging a local model snapshot against its revision's manifest (plugins/module_utils/snapshot.py)."""
import hashlib
import json

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import snapshot


def blob_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture
def repo(tmp_path):
    files = {"config.json": b'{"model_type": "glm_moe_dsa"}\n', "model-00001.safetensors": b"\x01" * 4096,
             "sub/tokenizer.json": b"{}\n"}
    for p, d in files.items():
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_bytes(d)
    listing = [{"type": "directory", "path": "sub", "oid": "x", "size": 0}]
    for p, d in files.items():
        e = {"type": "file", "path": p, "size": len(d), "oid": blob_oid(d)}
        if p.endswith(".safetensors"):
            e["oid"] = "pointer-oid"
            e["lfs"] = {"oid": hashlib.sha256(d).hexdigest(), "size": len(d), "pointerSize": 130}
        listing.append(e)
    return tmp_path, snapshot.normalise_manifest(listing)


def test_manifest_keeps_files_with_how_to_verify_them(repo):
    _, manifest = repo
    assert [m["path"] for m in manifest] == ["config.json", "model-00001.safetensors", "sub/tokenizer.json"]
    assert "sha256" in manifest[1] and "git_oid" in manifest[0]


@pytest.mark.parametrize("entries", [{}, [], [{"type": "file", "path": "../x", "size": 1, "oid": "a"}],
                                     [{"type": "file", "path": "a", "size": 1}], [{"type": "file", "size": 1}]])
def test_bad_listings_are_refused(entries):
    with pytest.raises(snapshot.ManifestError):
        snapshot.normalise_manifest(entries)


def test_complete_copy_verifies(repo):
    root, manifest = repo
    judged = snapshot.compare(root, manifest, verify=True)
    assert judged["complete"] and judged["needed_bytes"] == 0
    assert judged["total_bytes"] == sum(m["size"] for m in manifest)


def test_missing_truncated_and_corrupted_files_are_named(repo):
    root, manifest = repo
    (root / "config.json").unlink()
    (root / "sub/tokenizer.json").write_bytes(b"{")            # interrupted: wrong size
    (root / "model-00001.safetensors").write_bytes(b"\x02" * 4096)  # same size, other content
    quick = snapshot.compare(root, manifest, verify=False)
    assert quick["missing"] == ["config.json"] and quick["wrong_size"] == ["sub/tokenizer.json"]
    assert quick["wrong_hash"] == []  # sizes only: not read
    full = snapshot.compare(root, manifest, verify=True)
    assert full["wrong_hash"] == ["model-00001.safetensors"] and not full["complete"]
    assert full["needed_bytes"] == sum(m["size"] for m in manifest)


def test_small_files_are_checked_by_git_blob_id(repo):
    root, manifest = repo
    (root / "config.json").write_bytes(b'{"model_type": "glm_moe_dsX"}\n')
    assert snapshot.compare(root, manifest, verify=True)["wrong_hash"] == ["config.json"]


def test_marker_round_trip_and_mismatch(repo):
    root, manifest = repo
    (root / snapshot.MARKER).write_text(snapshot.marker_content("org/m", "a" * 40, manifest))
    marker = snapshot.read_marker(root)
    assert snapshot.marker_matches(marker, "org/m", "a" * 40)
    assert not snapshot.marker_matches(marker, "org/m", "b" * 40)
    assert not snapshot.marker_matches(marker, "org/other", "a" * 40)
    (root / snapshot.MARKER).write_text("not json")
    assert snapshot.read_marker(root) is None


def test_extra_files_leave_out_the_marker_and_the_clients_cache(repo):
    root, manifest = repo
    (root / snapshot.MARKER).write_text("{}")
    (root / ".cache/huggingface").mkdir(parents=True)
    (root / ".cache/huggingface/x.incomplete").write_bytes(b"1")
    (root / "stale.bin").write_bytes(b"1")
    assert snapshot.extra_files(root, manifest) == ["stale.bin"]


def test_progress_line():
    line = snapshot.progress_line(1 << 30, 410 << 30, 10, rate=100 << 20)
    assert line.startswith("1.0 GiB of 410.0 GiB (0.2%), 100.0 MiB/s, about 1 h 9 min left")
    assert "(100.0%)" in snapshot.progress_line(11, 10, 1)
    assert snapshot.human_duration(59) == "59 s" and snapshot.human_duration(3600) == "1 h 0 min"
