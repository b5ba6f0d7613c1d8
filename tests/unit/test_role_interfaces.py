"""Roles talk through named outputs: one that reads what another installs reads the variable that role exports and
documents, never a path it guesses; an output that nothing reads is not set."""
import re
import subprocess

import yaml

from conftest import REPO

# outputs that only their Molecule scenario reads, left to the role's owner (issue 15, point 5)
PENDING: set[str] = set()


def _outputs():
    """name -> files, for every registered result and set_fact of a role that is not private (``__role_``)."""
    outs = {}

    def walk(tasks, path):
        for t in tasks or []:
            if not isinstance(t, dict):
                continue
            for key in ("block", "rescue", "always"):
                walk(t.get(key), path)
            names = [t["register"]] if t.get("register") else []
            facts = t.get("ansible.builtin.set_fact")
            if isinstance(facts, dict):
                names += [k for k in facts if k != "cacheable"]
            for name in names:
                if not name.startswith("__"):
                    outs.setdefault(name, set()).add(path)

    for f in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        walk(yaml.safe_load(f.read_text()), str(f.relative_to(REPO)))
    return outs


def test_every_output_is_read():
    unread = {}
    for name, files in _outputs().items():
        hits = subprocess.run(["git", "grep", "-l", "-w", name, "--", "roles", "playbooks", "molecule"],
                              cwd=REPO, capture_output=True, text=True).stdout.split()
        readers = [h for h in hits if h not in files and not h.endswith((".md", "argument_specs.yml"))]
        if not readers and name not in PENDING:
            unread[name] = sorted(files)
    assert not unread, f"outputs that nothing reads (make them private, __role_..., or drop them): {unread}"


def test_verify_reads_the_service_paths_from_the_service_role():
    text = "\n".join(f.read_text() for f in (REPO / "roles/verify").glob("tasks/*.yml"))
    text += (REPO / "roles/verify/vars/main.yml").read_text()
    for guessed in ("/etc/systemd/system", "/deployed/", "/etc/{{"):
        assert guessed not in text, f"roles/verify guesses a path of sglang_service's: {guessed}"
    assert re.search(r"sglang_service_unit_path", text) and "sglang_service_deployed_release_path" in text


def test_the_service_role_documents_its_outputs():
    readme = (REPO / "roles/sglang_service/README.md").read_text()
    interface = yaml.safe_load((REPO / "roles/sglang_service/tasks/interface.yml").read_text())
    for name in interface[0]["ansible.builtin.set_fact"]:
        assert f"`{name}`" in readme.split("## Outputs", 1)[1], f"{name} is not in the README's Outputs"
