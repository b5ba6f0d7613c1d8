"""The stand-in wheel index: installable wheels with the real names and versions."""
import subprocess
import sys

import pytest

from lab import wheels


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    wheels.build(root)
    return root


@pytest.mark.parametrize("dist,version", [(d, v) for d, v, _, _ in wheels.STANDINS])
def test_each_stand_in_is_listed_with_a_hash(www, dist, version):
    page = (www / "simple" / wheels.normalise(dist) / "index.html").read_text()
    links = wheels.hrefs(page)
    # one link per version of the distribution that stands in
    assert len(links) == len([v for d, v, _, _ in wheels.STANDINS if d == dist])
    assert sum(f"-{version}-py3-none-any.whl#sha256=" in href for href in links) == 1


def test_stand_ins_install_and_say_what_they_are(www, tmp_path):
    # one version of each distribution (the last listed): a directory holds one
    last = {d: v for d, v, _, _ in wheels.STANDINS}
    files = sorted(str(p) for p in (www / "packages").glob("*.whl")
                   if any(p.name.startswith(f"{d.replace('-', '_')}-{v}-") for d, v in last.items()))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(tmp_path), *files], check=True)
    meta = (tmp_path / "torch-2.9.1+cu129.dist-info" / "METADATA").read_text()
    assert "Version: 2.9.1+cu129" in meta and "Lab stand-in" in meta
