"""A server flag of the sglang_service role is one entry of FLAGS (plugins/module_utils/sglang_argv.py): the argv
builder reads it there, and `python3 tools/role_docs.py` writes it into the role's argument spec, defaults, settings
and README (tools/server_flags.py). The files it writes are never stale, and a flag added the documented way reaches
the unit's command line and the argument spec's validation."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PLAYBOOK_HANG_BOUND, REPO
from test_service_unit import exec_start
from tools import server_flags

BIN = Path(sys.executable).parent
# what the render needs of the collection: its code, the production inventory and the render playbook
PARTS = ("ansible.cfg", "galaxy.yml", "meta", "plugins", "roles", "tools", "inventories/production", "tests/render")
FAKE = '    Flag("fake_batch_budget", "int", 7, "--fake-batch-budget (a flag the test adds)."),\n'


def test_the_files_the_table_writes_are_current():
    assert not server_flags.stale(), "the server flags' blocks are stale: run python3 tools/role_docs.py"


def test_the_argument_spec_and_defaults_hold_each_flag_as_the_table_says():
    spec = yaml.safe_load((REPO / "roles/sglang_service/meta/argument_specs.yml").read_text())["argument_specs"]
    defaults = yaml.safe_load((REPO / "roles/sglang_service/defaults/main.yml").read_text())
    for f in server_flags.flags():
        opt = spec["main"]["options"][f.variable]
        assert (opt["type"], opt["default"], opt.get("choices", [])) == (f.type, f.default, list(f.choices))
        assert spec["render"]["options"][f.variable] == opt
        assert defaults[f.variable] == f.default


@pytest.fixture(scope="module")
def copy_with_a_new_flag(tmp_path_factory):
    """A copy of the collection with one flag added to FLAGS, as roles/sglang_service/README.md says: the entry, then
    `python3 tools/role_docs.py`. Returns the copy and what --check said before and after."""
    root = tmp_path_factory.mktemp("collection")
    for part in PARTS:
        src, dst = REPO / part, root / part
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    (root / ".collections/ansible_collections/blackwell").mkdir(parents=True)
    (root / ".collections/ansible_collections/blackwell/serving").symlink_to(root)
    argv_py = root / "plugins/module_utils/sglang_argv.py"
    text = argv_py.read_text()
    head, tail = text.split("\nFLAGS = (\n", 1)
    body, rest = tail.split("\n)\n", 1)
    argv_py.write_text(f"{head}\nFLAGS = (\n{body}\n{FAKE})\n{rest}")

    def docs(*args):
        return subprocess.run([sys.executable, str(root / "tools/role_docs.py"), *args], cwd=str(root),
                              capture_output=True, text=True, timeout=120)

    before = docs("--check")
    written = docs()
    assert written.returncode == 0, written.stdout + written.stderr
    return root, before, docs("--check")


def render(root, out, extra=None):
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(root / "inventories/production"),
                           str(root / "tests/render/render_unit.yml"), "-e", f"render_dir={out}",
                           "-e", json.dumps(extra or {})],
                          cwd=str(root), capture_output=True, text=True, timeout=PLAYBOOK_HANG_BOUND,
                          # the copy's collection, whatever the environment names (the lab's test runner sets it)
                          env={**os.environ, "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
                               "ANSIBLE_COLLECTIONS_PATH": str(root / ".collections")})
    unit = out / "gpu-node-01.service"
    return proc, (unit.read_text() if unit.exists() else None)


def test_a_stale_file_fails_the_check_and_the_one_command_writes_it(copy_with_a_new_flag):
    root, before, after = copy_with_a_new_flag
    assert before.returncode == 1
    for rel in ("meta/argument_specs.yml", "defaults/main.yml", "vars/main.yml"):
        assert f"stale roles/sglang_service/{rel}" in before.stdout, before.stdout
    assert after.returncode == 0, after.stdout
    assert "`sglang_service_fake_batch_budget` | int | no | `7`" in (root / "roles/sglang_service/README.md").read_text()


def test_a_new_flag_reaches_the_units_command_line(copy_with_a_new_flag, tmp_path):
    root = copy_with_a_new_flag[0]
    proc, unit = render(root, tmp_path / "default")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    argv = exec_start(unit)
    # after the table's other flags, before --config (whose value follows it)
    assert argv[argv.index("--config") - 2:argv.index("--config")] == ["--fake-batch-budget", "7"]
    proc, unit = render(root, tmp_path / "set", {"sglang_service_fake_batch_budget": 12})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    argv = exec_start(unit)
    assert argv[argv.index("--fake-batch-budget") + 1] == "12"


def test_a_new_flag_of_the_wrong_type_is_refused_by_the_argument_spec(copy_with_a_new_flag, tmp_path):
    root = copy_with_a_new_flag[0]
    proc, unit = render(root, tmp_path, {"sglang_service_fake_batch_budget": "many"})
    assert proc.returncode != 0 and unit is None
    out = proc.stdout + proc.stderr
    # ansible-core's words (2.16 writes the type as <class 'str'>)
    assert "argument 'sglang_service_fake_batch_budget' is of type" in out, out[-3000:]
    assert "unable to convert to int" in out, out[-3000:]
