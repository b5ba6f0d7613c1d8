"""model_weights' layout.yml, run by ansible-playbook on this machine against a directory tree: one read stands in
for the link's stat, the rollback link's stat and the find of the revisions on disk. What it leaves must be what
those tasks left: the revisions neither pinned, in service, nor kept for a rollback pruned (hidden directories
too, links never), the old layout (weights in the model's path itself) moved to its revision's directory and
linked, and `__model_weights_link` as stat put it."""
import getpass
import grp
import json
import os

import pytest

from conftest import run_local_playbook
from modrun import serve

ROLE = "blackwell.serving.model_weights"
A, B, C, D = ("a" * 40), ("b" * 40), ("c" * 40), ("d" * 40)
# the Hub stand-in's address, set by the fixture hub for each test
ENDPOINT = ""

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: {role}
        tasks_from: layout
    - ansible.builtin.copy:
        content: "{{{{ {{'link': __model_weights_link, 'read': __model_weights_layout_read}} | to_json }}}}"
        dest: "{{{{ out }}}}"
        mode: "0644"
      check_mode: false
"""


@pytest.fixture(autouse=True)
def hub():
    """The Hub's tree listing, for revisions A to D only (another answers 404, as the Hub does)."""
    listing = json.dumps([{"type": "file", "path": "config.json", "size": 2, "oid": "0" * 40}]).encode()

    def answer(path):
        return (200, listing) if any(f"/tree/{rev}?" in path for rev in (A, B, C, D)) else (404, b"{}")

    global ENDPOINT
    with serve(answer) as url:
        ENDPOINT = url
        yield url


def run_layout(tmp_path, pinned, check=False):
    out = tmp_path / "out.json"
    run_local_playbook(tmp_path, PLAYBOOK.format(role=ROLE), {
        "out": str(out), "model_weights_path": str(tmp_path / "model"), "model_weights_revision": pinned,
        "model_weights_owner": getpass.getuser(), "model_weights_group": grp.getgrgid(os.getgid()).gr_name,
        "model_weights_token": "", "model_weights_endpoint": ENDPOINT}, check=check)
    return json.loads(out.read_text())


def revisions(tmp_path):
    return sorted(p.name for p in (tmp_path / "model.revisions").iterdir())


@pytest.fixture
def tree(tmp_path):
    revs = tmp_path / "model.revisions"
    for rev in (A, B, C, "." + D):
        (revs / rev / ".cache").mkdir(parents=True)
    (revs / "note.txt").write_text("not a revision\n")
    return tmp_path


def test_a_new_revision_staged_keeps_the_one_in_service_and_prunes_the_rest(tree):
    """In service A, pinned B: A and B kept, C and a hidden directory pruned; the rollback link (to C) is not
    what a stage keeps, and files and links are never pruned."""
    (tree / "model").symlink_to(tree / "model.revisions" / A)
    (tree / "model.revisions" / ".rollback").symlink_to(tree / "model.revisions" / C)
    got = run_layout(tree, pinned=B)
    assert revisions(tree) == [".rollback", A, B, "note.txt"]
    assert got["link"]["stat"]["islnk"] and got["link"]["stat"]["lnk_target"] == str(tree / "model.revisions" / A)
    # the read reported the tree as it was, in the same round trip
    assert sorted(got["read"]["paths"][str(tree / "model.revisions")]["entries"]) == ["." + D, ".rollback", A, B, C,
                                                                                    "note.txt"]


def test_the_revision_in_service_keeps_the_one_a_rollback_needs(tree):
    (tree / "model").symlink_to(tree / "model.revisions" / B)
    (tree / "model.revisions" / ".rollback").symlink_to(tree / "model.revisions" / C)
    run_layout(tree, pinned=B)
    assert revisions(tree) == [".rollback", B, C, "note.txt"]


def test_check_mode_prunes_nothing(tree):
    (tree / "model").symlink_to(tree / "model.revisions" / B)
    run_layout(tree, pinned=B, check=True)
    assert revisions(tree) == ["." + D, A, B, C, "note.txt"]


def test_the_old_layout_moves_to_its_revision_and_becomes_the_link(tmp_path):
    """The weights in the model's path itself, their marker naming revision A, pinned B: moved to A's directory
    (a rename: the same files), the path links there, and the link is what the rest of the role reads."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_text("weights\n")
    (model / ".blackwell-snapshot.json").write_text(json.dumps({"revision": A}))
    inode = (model / "model.safetensors").stat().st_ino
    got = run_layout(tmp_path, pinned=B)
    assert model.is_symlink() and os.readlink(model) == str(tmp_path / "model.revisions" / A)
    assert (tmp_path / "model.revisions" / A / "model.safetensors").stat().st_ino == inode
    assert got["link"]["stat"]["islnk"] and got["link"]["stat"]["lnk_target"] == str(tmp_path / "model.revisions" / A)
    assert revisions(tmp_path) == [A]


def test_a_file_in_place_of_the_link_stops_the_role(tmp_path):
    (tmp_path / "model").write_text("not weights\n")
    with pytest.raises(AssertionError, match="should be a link to a revision"):
        run_layout(tmp_path, pinned=B)
    assert (tmp_path / "model").read_text() == "not weights\n"


def test_a_revision_the_hub_does_not_know_is_refused_before_the_prune_even_with_its_directory_there(tree):
    """A directory of the pinned revision without a snapshot marker (an interrupted run, an older collection left
    it) is no proof the Hub knows it: the Hub is asked, and its 404 stops the role before anything is pruned."""
    unknown = "e" * 40
    (tree / "model.revisions" / unknown).mkdir()
    (tree / "model").symlink_to(tree / "model.revisions" / A)
    with pytest.raises(AssertionError, match=f"model_weights_revision {unknown} is not a revision that"):
        run_layout(tree, pinned=unknown)
    assert revisions(tree) == ["." + D, A, B, C, unknown, "note.txt"]


def test_a_revision_recorded_complete_asks_the_hub_nothing(tree):
    """Its marker says a run verified it against the Hub's listing: a converged host makes no request (the Hub's
    stand-in here would refuse this revision, so a request would stop the role)."""
    known = "f" * 40
    (tree / "model.revisions" / known).mkdir()
    (tree / "model.revisions" / known / ".blackwell-snapshot.json").write_text(json.dumps({"revision": known}))
    (tree / "model").symlink_to(tree / "model.revisions" / known)
    run_layout(tree, pinned=known)
    assert known in revisions(tree)
