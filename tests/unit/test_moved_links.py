"""unit_deploy restarts a service when a link it reads (the model's, which model_weights switches) moved, or when a
file that says what it reads was repaired changed since it started."""
import pytest

import yaml

from ansible_collections.blackwell.serving.plugins.filter.deploy import changed_stamps, moved_links
from ansible_collections.blackwell.serving.plugins.module_utils import snapshot
from conftest import REPO

MODEL = "/srv/models/zai-org/GLM-5-NVFP4"


def test_a_moved_link_is_a_reason_naming_both_targets():
    reasons = moved_links({MODEL: "/srv/models/.rev/bbbb"}, {MODEL: "/srv/models/.rev/aaaa"})
    assert reasons == [f"{MODEL} moved (aaaa to bbbb)"]


def test_a_link_where_it_was_is_no_reason():
    assert moved_links({MODEL: "/r/a"}, {MODEL: "/r/a"}) == []


def test_a_link_the_record_does_not_name_is_no_reason():
    # a host deployed before the link was watched: what runs is what was recorded
    assert moved_links({MODEL: "/r/a"}, {}) == []


def test_a_link_that_disappeared_is_a_reason():
    assert moved_links({MODEL: ""}, {MODEL: "/r/a"}) == [f"{MODEL} moved (a to nothing)"]


def test_wrong_types_are_refused():
    with pytest.raises(TypeError):
        moved_links([MODEL], {})


REPAIRS = f"{MODEL}/.blackwell-repairs.json"


def test_a_repair_since_the_start_is_a_reason():
    assert changed_stamps({REPAIRS: "bb"}, {REPAIRS: "aa"}) == [
        f"{REPAIRS} changed since it was started (a file it reads was repaired: it may have loaded the bad copy)"]
    # the first repair of a model the service started on before any: the record had no such file
    assert len(changed_stamps({REPAIRS: "bb"}, {REPAIRS: ""})) == 1
    assert len(changed_stamps({REPAIRS: "bb"}, {})) == 1


def test_no_repair_or_none_since_the_start_is_no_reason():
    assert changed_stamps({REPAIRS: ""}, {}) == []
    assert changed_stamps({REPAIRS: "aa"}, {REPAIRS: "aa"}) == []
    with pytest.raises(TypeError):
        changed_stamps([REPAIRS], {})


def test_the_server_watches_the_file_model_weights_writes():
    watched = yaml.safe_load((REPO / "roles" / "sglang_service" / "vars" / "main.yml").read_text())
    assert [w.rsplit("/", 1)[1] for w in watched["__sglang_service_input_stamps"]] == [snapshot.REPAIRS]
