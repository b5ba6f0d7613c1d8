"""The collection builds, installs, passes ansible-test sanity, and its playbooks resolve when installed."""
import shutil
import tarfile

import pytest

from helpers import REPO, run
from lab import paths

GET_PIP = REPO / "lab" / "files" / "get_pip_offline.py"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    proc = run(["ansible-galaxy", "collection", "build", "--force", "--output-path", out, REPO])
    assert proc.returncode == 0
    tarballs = list(out.glob("blackwell-serving-*.tar.gz"))
    assert len(tarballs) == 1
    return tarballs[0]


def test_tarball_ships_the_collection_and_not_the_lab(built):
    names = tarfile.open(built).getnames()
    assert "MANIFEST.json" in names and "roles/preflight/tasks/main.yml" in names
    assert "playbooks/site.yml" in names
    assert not [n for n in names if n.startswith(("lab/", ".collections", "tests/unit"))]


def test_installed_playbook_resolves_by_name(built, tmp_path):
    # as a user would: no checkout around, only the installed collection on the path
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\n")
    env = {"ANSIBLE_COLLECTIONS_PATH": f"{tmp_path / 'c'}", "ANSIBLE_CONFIG": str(cfg)}
    proc = run(["ansible-galaxy", "collection", "install", "--offline", "--force", "-p", tmp_path / "c", built],
               env=env)
    assert proc.returncode == 0
    proc = run(["ansible-playbook", "-i", REPO / "inventories" / "production", "--list-tasks",
                "blackwell.serving.site"], env=env, cwd=tmp_path)
    assert proc.returncode == 0
    assert "blackwell.serving.preflight" in proc.stdout
    # the fleet's playbooks too, with the task files and the preflight plays they take from the collection
    for name, says in (("repin", "Roll the stack across the servers"), ("drift", "Drift from the stack file"),
                       ("verify", "Verify")):
        proc = run(["ansible-playbook", "-i", REPO / "inventories" / "production", "--list-tasks",
                    f"blackwell.serving.{name}"], env=env, cwd=tmp_path)
        assert proc.returncode == 0, f"blackwell.serving.{name} does not resolve (output above)"
        assert says in proc.stdout


def test_ansible_test_sanity(built):
    """ansible-test sanity on exactly what ships (the built tarball, unpacked)."""
    root = paths.sub("sanity")
    tree = root / "ansible_collections" / "blackwell" / "serving"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    with tarfile.open(built) as tf:
        tf.extractall(tree, filter="data")
    # ansible-test fetches get-pip.py from a host out of reach; give it one that works offline
    home = paths.sub("ansible-test-home")
    cache = home / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    for version in ("24_2",):
        shutil.copy(GET_PIP, cache / f"get_pip_{version}.py")
    proc = run(["ansible-test", "sanity", "--local", "--python", "3.11", "--color", "no"], cwd=tree,
               env={"HOME": str(home)}, timeout=1500)
    assert proc.returncode == 0, "ansible-test sanity failed (output above)"
