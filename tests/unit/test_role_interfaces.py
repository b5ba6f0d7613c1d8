"""Roles talk through named outputs: one that reads what another installs reads the variable that role exports and
documents, never a path it guesses; an output that nothing reads is not set."""
import re
import subprocess

import jinja2
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


def _role_text(role, parts=("tasks", "vars", "defaults", "templates")):
    return "\n".join(f.read_text() for part in parts for f in sorted((REPO / "roles" / role / part).glob("*"))
                     if f.is_file())


def test_roles_that_need_a_virtual_environment_get_it_one_way():
    """One pattern: include uv_venv with the role's own names unless this run converged that path (its output
    uv_venv_envs), and read uv and the interpreter from that output; no fallback to a guessed binary, no assert that
    a caller ran it first."""
    users = [r.name for r in sorted((REPO / "roles").iterdir()) if r.name != "uv_venv" and "uv_venv" in _role_text(r.name)]
    assert {"sglang", "model_weights", "sglang_router"} <= set(users)
    for role in users:
        text = _role_text(role)
        assert not re.search(r"uv_venv_(uv|interpreter)\b", text), f"{role} reads uv_venv's role variables, not its output"
        assert not re.search(r"uv_venv_envs[^\n]*\|\s*default\(['\"]/", text), f"{role} falls back to a guessed path"
        includes = []

        def walk(tasks):
            for t in tasks or []:
                if isinstance(t, dict):
                    for key in ("block", "rescue", "always"):
                        walk(t.get(key))
                    inc = t.get("ansible.builtin.include_role") or {}
                    if inc.get("name") == "blackwell.serving.uv_venv":
                        includes.append(t)

        for f in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
            walk(yaml.safe_load(f.read_text()))
        assert len(includes) == 1, f"{role} includes uv_venv {len(includes)} times"
        inc = includes[0]
        path = inc["vars"]["uv_venv_path"].strip("{} ")
        # the condition, evaluated: the include runs where uv_venv has not made this venv in the run, only there
        runs = jinja2.Environment().compile_expression(inc["when"])
        assert runs(**{path: "/v"}) and runs(**{path: "/v", "uv_venv_envs": {"/w": {}}}), inc["when"]
        assert not runs(**{path: "/v", "uv_venv_envs": {"/v": {}}}), inc["when"]
        assert {"uv_venv_user", "uv_venv_group", "uv_venv_home", "uv_venv_path"} <= set(inc["vars"])
        assert "public" not in inc["ansible.builtin.include_role"], f"{role} needs no uv_venv variable but its output"
