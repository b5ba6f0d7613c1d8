"""The systemd_quote filter: what systemd reads back is the word, with nothing expanded."""
import pytest

from ansible_collections.blackwell.serving.plugins.filter.systemd import systemd_quote


@pytest.mark.parametrize("word, quoted", [
    ("/srv/models/GLM-5-NVFP4", "/srv/models/GLM-5-NVFP4"),
    ("0.9", "0.9"),
    (8, "8"),
    ("NCCL_P2P_LEVEL=SYS", "NCCL_P2P_LEVEL=SYS"),
    ("/srv/my model", '"/srv/my model"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("50%", "50%%"),
    ("$HOME", "$$HOME"),
    ("a\\b", '"a\\\\b"'),
    ("", '""'),
])
def test_systemd_quote(word, quoted):
    assert systemd_quote(word) == quoted
