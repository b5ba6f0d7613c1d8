"""The lab's fetcher of real upstream files: pinned by hash, unpacked like sglang's python/ tree."""
import io
import tarfile

import pytest

from lab import upstream
from lab.util import LabError


def _sdist(path, files):
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_unpinned_file_is_refused_before_any_download(monkeypatch, tmp_path):
    monkeypatch.setenv("BLACKWELL_LAB_HOME", str(tmp_path))
    monkeypatch.setattr(upstream, "_file_url", lambda *a: pytest.fail("looked up an unpinned file"))
    with pytest.raises(LabError, match="not pinned"):
        upstream.fetch("sglang", "sglang-0.0.1.tar.gz")


def test_download_with_another_hash_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("BLACKWELL_LAB_HOME", str(tmp_path))
    served = tmp_path / "served.tar.gz"
    served.write_bytes(b"not the release")
    monkeypatch.setattr(upstream, "_file_url", lambda *a: served.as_uri())
    with pytest.raises(LabError, match="pinned"):
        upstream.sglang_sdist("0.5.9")
    assert not (tmp_path / "upstream" / "sglang-0.5.9.tar.gz").exists()


def test_sdist_unpacks_without_its_top_directory(tmp_path):
    sdist = tmp_path / "sglang-9.9.tar.gz"
    _sdist(sdist, {"sglang-9.9/pyproject.toml": b"[project]\n", "sglang-9.9/sglang/__init__.py": b""})
    tree = upstream.extract_sdist(sdist, tmp_path / "python")
    assert (tree / "pyproject.toml").read_text() == "[project]\n"
    assert (tree / "sglang" / "__init__.py").is_file()
