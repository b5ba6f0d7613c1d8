"""site.yml reads a converged host's weights once: the early start (entry point `start`) reads the layout and the
snapshot, and where the pinned revision was complete, the main entry point later in the same run trusts that read
on the same inputs instead of repeating it (about eight round trips on a converged host)."""
import re

import yaml

from conftest import REPO

TASKS = REPO / "roles" / "model_weights" / "tasks"


def _tasks(name):
    return yaml.safe_load((TASKS / name).read_text())


def _key_vars():
    text = (REPO / "roles" / "model_weights" / "vars" / "main.yml").read_text()
    key = yaml.safe_load(text)["__model_weights_inputs_key"]
    return set(re.findall(r"\b(model_weights_\w+|ansible_check_mode)\b", key))


def test_the_start_marks_only_a_complete_revision():
    mark = next(t for t in _tasks("start.yml") if "ansible.builtin.set_fact" in t)
    assert mark["ansible.builtin.set_fact"] == {"__model_weights_start_complete": "{{ __model_weights_inputs_key }}"}
    assert "__model_weights_before.complete | default(false) | bool" in mark["when"]
    # it comes after the read it vouches for
    names = [t["name"] for t in _tasks("start.yml")]
    assert names.index(mark["name"]) == len(names) - 1


def test_the_main_entry_point_skips_the_read_on_the_same_inputs_only_once():
    stage = _tasks("stage.yml")
    for file in ("layout.yml", "download.yml"):
        task = next(t for t in stage if t.get("ansible.builtin.include_tasks", {}).get("file") == file)
        # included: a skipped import would replace the start's registered results with skipped ones
        assert "__model_weights_start_complete | default('') != __model_weights_inputs_key" in task["when"]
        assert task["ansible.builtin.include_tasks"]["apply"]["tags"] == task["tags"]
    clear = next(t for t in stage if "ansible.builtin.set_fact" in t)
    # cleared on every run of the stage, and what it said passed on to wait.yml and switch.yml for this run only
    assert "when" not in clear
    assert clear["ansible.builtin.set_fact"]["__model_weights_start_complete"] == ""
    trusted = clear["ansible.builtin.set_fact"]["__model_weights_trusted"]
    assert "__model_weights_start_complete | default('') == __model_weights_inputs_key" in trusted
    # complete by sizes only (no marker, a file changed since it was recorded) is verified and recorded as ever
    assert "__model_weights_before.source | default('') == 'marker'" in trusted
    order = [t["name"] for t in stage]
    reads = [i for i, t in enumerate(stage)
             if t.get("ansible.builtin.include_tasks", {}).get("file") in ("layout.yml", "download.yml")]
    assert order.index(clear["name"]) > max(reads)
    # wait.yml after it, as one skipped include where every one of its tasks would skip: the read is trusted (no
    # download runs, nothing is verified again) and the token's file is not to remove
    wait = next(t for t in stage if t.get("ansible.builtin.include_tasks", {}).get("file") == "wait.yml")
    assert order.index(wait["name"]) > order.index(clear["name"])
    assert wait["ansible.builtin.include_tasks"]["apply"]["tags"] == wait["tags"]
    assert wait["when"][0] == "model_weights_download | bool"
    skip = " ".join(wait["when"][1].split())
    assert skip == ("not (__model_weights_trusted | bool and (model_weights_token | length == 0"
                    " or __model_weights_layout_read.holds | default(false) | bool))")
    for task in _tasks("wait.yml"):
        # each task's own condition skips it where the include is skipped
        when = " ".join(str(task.get("when", "")).split())
        assert any(c in when for c in ("not __model_weights_before.complete", "__model_weights_trusted",
                                       "is not skipped")), task["name"]


def test_what_is_missing_is_fetched_by_one_include_that_a_complete_revision_skips():
    """download.yml's tasks after the read (space, message, the client, the token, the download) ran only where the
    revision was not complete, each skipped on a converged host: they are one include with that condition."""
    download = _tasks("download.yml")
    fetch = download[-1]
    assert fetch["ansible.builtin.include_tasks"]["file"] == "download_fetch.yml"
    assert fetch["when"] == "not __model_weights_before.complete"
    assert [n for n, t in enumerate(download) if "blackwell.serving.model_snapshot" in t] == [len(download) - 2]
    moved = _tasks("download_fetch.yml")
    assert len(moved) == 5 and any("ansible.builtin.command" in t for t in moved)
    assert not any("__model_weights_before.complete" in str(t.get("when", "")) for t in moved)


def test_the_key_covers_every_input_of_the_read_on_a_complete_revision():
    """A task of layout.yml, or of download.yml that runs where the revision is complete, reads these variables:
    each must be in the key, or a changed input would be answered by a stale read."""
    read = [t for t in _tasks("layout.yml")]
    read += [t for t in _tasks("download.yml") if "not __model_weights_before.complete" not in str(t.get("when", ""))]
    used = set()
    for task in read:
        used |= set(re.findall(r"\bmodel_weights_(?!token\b)\w+", yaml.safe_dump(task)))
    defaults = yaml.safe_load((REPO / "roles" / "model_weights" / "defaults" / "main.yml").read_text())
    used = {v for v in used if v in defaults}
    assert used, "no inputs found: the test reads the wrong files"
    assert used <= _key_vars(), used - _key_vars()
    assert {"ansible_check_mode", "model_weights_download"} <= _key_vars()


def test_nothing_between_the_start_and_the_main_entry_point_touches_the_weights():
    """site.yml's roles between the two entry points are the driver, CUDA and the Python stack: none of them
    names a model_weights_ variable or the model's path (a role that did could change what the start read)."""
    site = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    steps = [((t.get("ansible.builtin.import_role") or t.get("ansible.builtin.include_role"))["name"].rsplit(".", 1)[-1],
              (t.get("ansible.builtin.import_role") or t.get("ansible.builtin.include_role")).get("tasks_from", "main"))
             for play in site for t in play.get("tasks", [])
             if "ansible.builtin.import_role" in t or "ansible.builtin.include_role" in t]
    start = steps.index(("model_weights", "start"))
    main = steps.index(("model_weights", "main"), start)
    roles = steps[start + 1:main]
    assert {"nvidia_driver", "cuda_toolkit", "sglang"} <= {r for r, _ in roles}, roles
    for role, _ in roles:
        for path in (REPO / "roles" / role / "tasks").glob("*.yml"):
            assert not re.search(r"\bmodel_weights_", path.read_text()), (role, path.name)


def test_wait_and_switch_trust_the_start_only_where_it_found_the_revision_complete():
    """Where the early start found the revision complete, the main entry point neither verifies the snapshot again
    nor reads the link again when it points at the revision; the output model_weights_previous_dir is set either
    way. The switch entry point alone (repin.yml, no early start) trusts nothing."""
    verify = next(t for t in _tasks("wait.yml") if "blackwell.serving.model_snapshot" in t)
    assert "not (__model_weights_trusted | default(false) | bool)" in verify["when"]
    switch = _tasks("switch.yml")
    link = next(t for t in switch if "ansible.builtin.include_tasks" in t)
    # untagged, as its tasks were: the main entry point's import tags them, the entry point switch does not
    assert link["ansible.builtin.include_tasks"] == "switch_link.yml" and "tags" not in link
    # included: a skipped stat would replace the start's registered link with a skipped result
    assert any("__model_weights_trusted | default(false) | bool" in w
               and "__model_weights_link.stat.lnk_target | default('') == __model_weights_dir" in w
               for w in link["when"])
    assert "model_weights_previous_dir" in next(t for t in switch if "ansible.builtin.set_fact" in t)[
        "ansible.builtin.set_fact"]
    assert not any("__model_weights_trusted" in yaml.safe_dump(t) for t in _tasks("switch_link.yml"))


def test_the_layout_read_judges_what_the_directory_task_and_the_token_removal_would_change():
    """layout.yml's one read stands in for download.yml's directories and wait.yml's token removal where it holds:
    it must judge exactly the directories that task makes, with the same owner, group and mode, and the token's
    file absent."""
    read = next(t for t in _tasks("layout.yml") if "blackwell.serving.host_state" in t)["blackwell.serving.host_state"]
    mkdir = next(t for t in _tasks("download.yml") if t["name"] == "download | The revision's directory")
    judged = {f["path"]: f for f in read["files"]}
    for path in mkdir["loop"]:
        assert judged[path]["state"] == "directory"
        for key in ("owner", "group", "mode"):
            assert judged[path][key] == mkdir["ansible.builtin.file"][key], (path, key)
    assert len(judged) == len(mkdir["loop"]) + 1
    assert judged["{{ __model_weights_token_path }}"]["state"] == "absent"
    assert "not (__model_weights_layout_read.holds | default(false) | bool)" in str(mkdir["when"])
    token = next(t for t in _tasks("wait.yml") if t["name"].startswith("wait | The access token's file"))
    assert token["ansible.builtin.file"] == {"path": "{{ __model_weights_token_path }}", "state": "absent"}
    # only where this run started no download: a download of this run writes the token after the read
    assert any("__model_weights_trusted" in w and "__model_weights_layout_read.holds" in w for w in token["when"])
