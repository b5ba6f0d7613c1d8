"""unit_deploy restarts a service when a link it reads (the model's, which model_weights switches) moved."""
import pytest

from ansible_collections.blackwell.serving.plugins.filter.deploy import moved_links

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
