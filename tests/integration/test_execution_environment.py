"""The execution environment for automation platforms (execution-environment.yml): ansible-builder makes a build
context from it, with the collection built from this checkout and the ansible-core CI runs the whole suite on (no
image is built: no registry is in reach here)."""
import shutil

import yaml

from helpers import REPO, run


def test_ansible_builder_makes_a_build_context_with_the_collection(tmp_path):
    spec = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    pinned = next(line.split("==")[1].strip() for line in (REPO / "lab" / "requirements.txt").read_text().splitlines()
                  if line.startswith("ansible-core=="))
    assert spec["version"] == 3
    assert spec["dependencies"]["ansible_core"]["package_pip"] == f"ansible-core=={pinned}"
    build = REPO / "ee-build"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir()
    try:
        assert run(["ansible-galaxy", "collection", "build", "--output-path", str(build), str(REPO)]).returncode == 0
        context = tmp_path / "context"
        proc = run(["ansible-builder", "create", "-f", str(REPO / "execution-environment.yml"), "--context",
                    str(context)], cwd=REPO)
        assert proc.returncode == 0, "ansible-builder create failed (output above)"
        steps = next(context / name for name in ("Containerfile", "Dockerfile") if (context / name).exists()).read_text()
        # the collection built from this checkout is in the context, copied in and installed from the file
        assert [p.name for p in (context / "_build" / "collections").iterdir()][0].startswith("blackwell-serving-")
        assert "COPY _build/collections/ /build/collections/" in steps and "ansible-galaxy collection install" in steps
        assert f"ansible-core=={pinned}" in steps and "EE_BASE_IMAGE" in steps
        requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
        assert requirements["collections"] == [{"name": "/build/collections/blackwell-serving.tar.gz", "type": "file"}]
    finally:
        shutil.rmtree(build, ignore_errors=True)
