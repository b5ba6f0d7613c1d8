"""A phase that a host_state read lets a converged host skip: the read judges what the phase's tasks would change.
Where the read asks a command the phase asks too, it must be the same command. (sglang_service's user and config
phases take their read and their writes from the same data, vars/main.yml: tests/unit/test_sglang_service_state.py
runs them.)"""
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def tasks(path):
    """The tasks of a task file, blocks flattened."""
    def walk(items):
        for t in items or []:
            if "block" in t:
                yield from walk(t["block"])
            else:
                yield t
    return list(walk(yaml.safe_load(path.read_text())))


def test_unit_deploy_skips_the_enablement_only_where_its_read_judges_what_it_would_change():
    """deploy.yml's one read judges the unit's enablement (and a pending daemon reload, which judge_unit counts); the
    enablement task is skipped on `holds`, so it may change nothing the read does not judge."""
    deploy = tasks(REPO / "roles" / "unit_deploy" / "tasks" / "deploy.yml")
    read = next(t for t in deploy if "blackwell.serving.host_state" in t)
    spec = read["blackwell.serving.host_state"]
    assert set(spec) == {"read", "units"}, "the read judges only the unit: anything else would make holds mean more"
    enable = next(t for t in deploy if t.get("ansible.builtin.systemd_service", {}).get("enabled") is True)
    args = enable["ansible.builtin.systemd_service"]
    assert set(args) <= {"name", "enabled", "daemon_reload"}, f"the enablement task changes more than the read judges: {args}"
    assert spec["units"] == [{"name": args["name"], "enabled": True}]
    conditions = enable["when"] if isinstance(enable["when"], list) else [enable["when"]]
    assert any(f"not {read['register']}.holds" in c for c in conditions), conditions
    # a unit file this run changed is always enabled (and systemd reloaded), whatever the read found before the write
    assert any("unit_deploy_unit_changed" in c and "holds" in c for c in conditions), conditions


def test_cuda_toolkit_reads_nvcc_as_path_yml_asks_it():
    """Where the state read holds, its nvcc answer is the one judged: it must be the same command."""
    read = tasks(REPO / "roles" / "cuda_toolkit" / "tasks" / "state.yml")[0]["blackwell.serving.host_state"]
    ask = next(t for t in tasks(REPO / "roles" / "cuda_toolkit" / "tasks" / "path.yml")
               if t["name"] == "path | Ask nvcc which release it is")
    assert read["commands"][0] == {"argv": ask["ansible.builtin.command"]["argv"]}
    assert any("not (__cuda_toolkit_holds" in c for c in ask["when"]), ask["when"]
    judge = REPO / "roles" / "cuda_toolkit" / "vars" / "main.yml"
    assert "__cuda_toolkit_state.commands[0] if __cuda_toolkit_holds" in judge.read_text()


def test_cuda_toolkit_reads_the_alternative_as_path_yml_reads_it():
    """dpkg's alternative for /usr/local/cuda: the state read asks what path.yml asks, and holds only where it is
    set by hand to the pinned release (the regex path.yml's --set task is skipped on)."""
    read = tasks(REPO / "roles" / "cuda_toolkit" / "tasks" / "state.yml")
    path = {t["name"]: t for t in tasks(REPO / "roles" / "cuda_toolkit" / "tasks" / "path.yml")}
    ask = path["path | Read the alternative that owns the stable path"]["ansible.builtin.command"]["argv"]
    assert ask == "{{ __cuda_toolkit_alternative_query_argv }}"
    assert "__cuda_toolkit_alternative_query_argv if __cuda_toolkit_alternative" in \
        read[0]["blackwell.serving.host_state"]["commands"][1]["argv"]
    holds = read[1]["ansible.builtin.set_fact"]["__cuda_toolkit_holds"]
    assert "commands[1].stdout is search(__cuda_toolkit_alternative_pinned_regex)" in holds
    setter = path["path | The alternative is set to the pinned release, by hand"]
    assert "__cuda_toolkit_alternative_read.stdout is not search(__cuda_toolkit_alternative_pinned_regex)" in \
        setter["when"]


def test_uv_venv_reads_uv_and_python_as_its_tasks_ask_them():
    """The state read's commands are the tasks' own (same argv, same environment), so their answers can stand in."""
    read = tasks(REPO / "roles" / "uv_venv" / "tasks" / "state.yml")[0]["blackwell.serving.host_state"]["commands"]
    uv = {t["name"]: t for t in tasks(REPO / "roles" / "uv_venv" / "tasks" / "uv.yml")}
    py = {t["name"]: t for t in tasks(REPO / "roles" / "uv_venv" / "tasks" / "python_find.yml")}
    argv = lambda t: [a.strip("{} ") for a in t["ansible.builtin.command"]["argv"]]  # noqa: E731
    assert argv(uv["uv | Which uv the bootstrap environment holds"]) == ["uv_venv_uv", "--version"]
    assert "{'argv': [uv_venv_uv, '--version']}" in read
    found = py["python_find | Find the interpreter the environments use"]
    assert argv(found) == ["uv_venv_uv", "python", "find",
                           "uv_venv_python if uv_venv_python | length > 0 else uv_venv_python_version"]
    assert "'python', 'find', uv_venv_python if uv_venv_python | length > 0 else uv_venv_python_version]" in read
    managed = py["python_find | Look for the uv-managed Python"]
    assert argv(managed) == ["uv_venv_uv", "python", "find", "--managed-python", "uv_venv_python_version"]
    assert "'python', 'find', '--managed-python', uv_venv_python_version]" in read
    for task in (found, managed):
        assert task["environment"] == "{{ __uv_venv_env }}"
    assert read.count("'environment': __uv_venv_env") == 2


def test_uv_venv_skips_its_uv_phase_as_one_task_only_where_nothing_of_it_would_change():
    """uv.yml is included, not imported: skipped as one task where the state read found both phases holding and the
    bootstrap environment's uv at the pin (the very test its install task makes), and then the pinned uv is ready
    (what uv.yml would have noted). A re-pinned uv, or anything the read found missing, runs it as before."""
    main = {t["name"]: t for t in tasks(REPO / "roles" / "uv_venv" / "tasks" / "main.yml")}
    inc = main["Install uv at the pinned version"]
    assert inc["ansible.builtin.include_tasks"]["file"] == "uv.yml"
    assert inc["ansible.builtin.include_tasks"]["apply"]["tags"] == inc["tags"] == ["uv_venv", "uv_venv_uv"]
    assert inc["when"] == "not (__uv_venv_uv_current | default(false) | bool)"
    uv = {t["name"]: t for t in tasks(REPO / "roles" / "uv_venv" / "tasks" / "uv.yml")}
    pinned = "search('^uv ' ~ (uv_venv_uv_version | regex_escape) ~ '( |$)')"
    assert "is not " + pinned in uv["uv | Install the pinned uv from the package index"]["when"]
    current = yaml.safe_load((REPO / "roles" / "uv_venv" / "vars" / "main.yml").read_text())["__uv_venv_uv_current_read"]
    assert "__uv_venv_state.holds | default(false)" in current
    assert "__uv_venv_state.commands[0].stdout is " + pinned in " ".join(current.split())
    note = tasks(REPO / "roles" / "uv_venv" / "tasks" / "state.yml")[-1]["ansible.builtin.set_fact"]
    assert note["__uv_venv_uv_current"] == note["__uv_venv_ready"] == "{{ __uv_venv_uv_current_read }}"
