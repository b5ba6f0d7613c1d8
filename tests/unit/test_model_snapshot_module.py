"""The model_snapshot module (plugins/modules/model_snapshot.py) against a small stand-in of the Hub's tree
listing: what it reads, what it records, and what it catches (issue 19, point 3)."""
import hashlib
import json
import os

import pytest

from modrun import run_module, serve, serve_in_turn

REPO_ID, REV = "org/model", "a" * 40
FILES = {"config.json": b'{"model_type": "glm_moe_dsa"}\n', "model-00001.safetensors": b"\x01" * 65536,
         "model-00002.safetensors": b"\x02" * 65536}
MARKER = ".blackwell-snapshot.json"


def hub_listing():
    """The Hub's tree listing of FILES, as its API answers it."""
    listing = []
    for p, d in FILES.items():
        e = {"type": "file", "path": p, "size": len(d),
             "oid": hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest()}
        if p.endswith(".safetensors"):
            e["lfs"] = {"oid": hashlib.sha256(d).hexdigest(), "size": len(d)}
        listing.append(e)
    return json.dumps(listing).encode()


@pytest.fixture
def hub():
    requests = []

    def answer(path):
        requests.append(path)
        return 200, hub_listing()

    with serve(answer) as url:
        yield url, requests


@pytest.fixture
def model(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    for p, d in FILES.items():
        (root / p).write_bytes(d)
    return root


def snap(root, endpoint, **args):
    return run_module("model_snapshot", {"path": str(root), "repo_id": REPO_ID, "revision": REV,
                                         "endpoint": endpoint, **args})


def corrupt_in_place(path, keep_mtime=True):
    """One byte changed, same size; the modification time set back as it was."""
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff")
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_marker_records_each_file_and_a_converged_copy_asks_nothing(hub, model):
    endpoint, requests = hub
    first = snap(model, endpoint, state="verified")
    assert first["complete"] and first["changed"] and sorted(first["hashed"]) == sorted(FILES)
    files = json.loads((model / MARKER).read_text())["files"]
    assert set(files) == set(FILES)
    assert {"size", "mtime_ns", "hash"} <= set(files["model-00001.safetensors"])
    assert files["model-00001.safetensors"]["hash"] == hashlib.sha256(FILES["model-00001.safetensors"]).hexdigest()
    asked = len(requests)
    again = snap(model, endpoint, state="verified")
    assert again["complete"] and not again["changed"] and again["source"] == "marker" and again["hashed"] == []
    assert len(requests) == asked, "a converged copy asked the Hub"


def test_a_file_written_after_the_marker_is_hashed(hub, model):
    """A shard re-downloaded (or rewritten) with the marker in place: the old module trusted the marker."""
    endpoint, _ = hub
    assert snap(model, endpoint, state="verified")["complete"]
    (model / "model-00002.safetensors").write_bytes(b"\x03" * 65536)  # same size, other content
    r = snap(model, endpoint, state="verified")
    assert r.get("failed") and r["wrong_hash"] == ["model-00002.safetensors"], r
    assert "model-00002.safetensors" in r["msg"]


def test_a_shard_corrupted_in_place_with_its_mtime_kept_is_caught(hub, model):
    endpoint, _ = hub
    assert snap(model, endpoint, state="verified")["complete"]
    corrupt_in_place(model / "model-00001.safetensors")
    r = snap(model, endpoint, state="verified")
    assert r.get("failed") and r["wrong_hash"] == ["model-00001.safetensors"], r
    checked = snap(model, endpoint, state="checked")
    assert not checked.get("failed") and checked["complete"] is False
    assert checked["wrong_hash"] == ["model-00001.safetensors"] and not checked["changed"]


def test_repair_removes_only_the_corrupted_file_and_its_client_record_and_logs_it(hub, model):
    """With repair, the file of wrong content goes (with huggingface_hub's record of it, so that the client fetches
    it again) and the repairs file names it; check mode names it and removes nothing."""
    endpoint, _ = hub
    assert snap(model, endpoint, state="verified")["complete"]
    bad = model / "model-00001.safetensors"
    corrupt_in_place(bad)
    client = model / ".cache" / "huggingface" / "download"
    client.mkdir(parents=True)
    (client / "model-00001.safetensors.metadata").write_text("commit\netag\n1\n")
    (client / "model-00002.safetensors.metadata").write_text("commit\netag\n1\n")
    changed_at = os.stat(bad).st_ctime
    checked = run_module("model_snapshot", {"path": str(model), "repo_id": REPO_ID, "revision": REV,
                                            "endpoint": endpoint, "state": "verified", "repair": True,
                                            "_ansible_check_mode": True})
    assert checked["changed"] and checked["removed"] == ["model-00001.safetensors"] and bad.exists()
    assert not (model / ".blackwell-repairs.json").exists()
    r = snap(model, endpoint, state="verified", repair=True)
    assert not r.get("failed") and r["changed"] and r["removed"] == ["model-00001.safetensors"], r
    assert r["complete"] is False and not bad.exists()
    assert not (client / "model-00001.safetensors.metadata").exists()
    assert (client / "model-00002.safetensors.metadata").exists() and (model / "model-00002.safetensors").exists()
    log = json.loads((model / ".blackwell-repairs.json").read_text())
    assert [list(x["files"]) for x in log["repairs"]] == [["model-00001.safetensors"]]
    assert log["repairs"][0]["files"]["model-00001.safetensors"] == changed_at
    # fetched again (as the download would), it verifies; the repairs file is not an extra file of the revision
    bad.write_bytes(FILES["model-00001.safetensors"])
    again = snap(model, endpoint, state="verified", repair=True)
    assert again["complete"] and again["removed"] == [] and again["extra"] == [], again
    # a second repair adds to the log
    corrupt_in_place(bad)
    assert snap(model, endpoint, state="verified", repair=True)["removed"] == ["model-00001.safetensors"]
    assert len(json.loads((model / ".blackwell-repairs.json").read_text())["repairs"]) == 2


def test_without_repair_a_missing_file_still_fails_and_nothing_is_removed(hub, model):
    endpoint, _ = hub
    (model / "model-00002.safetensors").unlink()
    corrupt_in_place(model / "model-00001.safetensors")
    r = snap(model, endpoint, state="verified")
    assert r.get("failed") and r["removed"] == [] and (model / "model-00001.safetensors").exists()


def test_checked_trusts_unchanged_records_and_rehash_reads_everything(hub, model, tmp_path):
    """Bit rot leaves no trace in the file's metadata: only a full re-hash finds it."""
    endpoint, _ = hub
    assert snap(model, endpoint, state="verified")["complete"]
    marker = json.loads((model / MARKER).read_text())
    corrupt_in_place(model / "model-00002.safetensors")
    st = os.stat(model / "model-00002.safetensors")
    marker["files"]["model-00002.safetensors"].update(mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
    (model / MARKER).write_text(json.dumps(marker))
    quick = snap(model, endpoint, state="checked")
    assert quick["complete"] and quick["hashed"] == [] and quick["marker_matches_manifest"]
    progress = tmp_path / "progress"
    full = snap(model, endpoint, state="checked", rehash=True, progress_file=str(progress))
    assert full["complete"] is False and full["wrong_hash"] == ["model-00002.safetensors"]
    assert sorted(full["hashed"]) == sorted(FILES) and not progress.exists()
    assert json.loads((model / MARKER).read_text()) == marker, "checked wrote to the marker"


def test_checked_without_a_marker_or_with_another_manifest_fails(hub, model):
    endpoint, _ = hub
    r = snap(model, endpoint, state="checked")
    assert r["complete"] is False and r["marker_matches_manifest"] is False
    assert snap(model, endpoint, state="verified")["complete"]
    marker = json.loads((model / MARKER).read_text())
    marker["manifest"][0]["size"] += 1
    (model / MARKER).write_text(json.dumps(marker))
    r = snap(model, endpoint, state="checked")
    assert r["complete"] is False and r["marker_matches_manifest"] is False


def probed(root, endpoint, **args):
    """sglang_probe's model part (verify's one round trip) on the same copy."""
    return run_module("sglang_probe", {"model": {"path": str(root), "repo_id": REPO_ID, "revision": REV,
                                                 "endpoint": endpoint, **args}})


def same_judgement(module_result):
    """model_snapshot's answer without what only that module returns (free space, what it changed or removed)."""
    return {k: v for k, v in module_result.items() if k not in ("free_bytes", "changed", "removed", "invocation")}


def test_the_probe_judges_the_weights_as_checked_does(hub, model):
    endpoint, _ = hub
    # no marker yet, then a converged copy, then one file rewritten: the same answer from both, nothing written
    for step in ("no marker", "recorded", "rewritten"):
        if step == "recorded":
            assert snap(model, endpoint, state="verified")["complete"]
        if step == "rewritten":
            corrupt_in_place(model / "model-00001.safetensors", keep_mtime=False)
        before = sorted((p.name, p.stat().st_mtime_ns) for p in model.iterdir())
        checked = snap(model, endpoint, state="checked")
        got = probed(model, endpoint)
        assert not got.get("failed") and not got["changed"], got
        assert got["model"] == same_judgement(checked), step
        assert sorted((p.name, p.stat().st_mtime_ns) for p in model.iterdir()) == before, "the probe wrote"
    assert got["model"]["complete"] is False and got["model"]["wrong_hash"] == ["model-00001.safetensors"]


def test_the_probe_says_why_the_weights_were_not_judged_and_never_fails(model):
    """No Hub answers, a branch name as the revision, a token with a newline: the message model_snapshot fails
    with, in the probe's answer (the judge shows it as found); the token's value never."""
    with serve(lambda path: (404, b"not found")) as endpoint:
        got = probed(model, endpoint)
        failed = snap(model, endpoint, state="checked")
    assert failed["failed"] and not got.get("failed")
    assert got["model"] == {"msg": failed["msg"]} and "could not list org/model" in got["model"]["msg"]
    assert probed(model, "http://127.0.0.1:9", revision="main")["model"]["msg"] == \
        "revision must be a full 40-hex commit id; got 'main'"
    secret = "hf_secret\n"
    got = probed(model, "http://127.0.0.1:9", token=secret)
    assert "token" in got["model"]["msg"] and "hf_secret" not in json.dumps(got)


def test_an_error_reading_the_copy_is_not_called_a_listing_failure(hub, model, monkeypatch):
    """Only the Hub's listing is wrapped as 'could not list': an error in the judging is said as what it is."""
    from ansible_collections.blackwell.serving.plugins.module_utils import http_session, model_check, snapshot
    from ansible_collections.blackwell.serving.plugins.modules import sglang_probe

    monkeypatch.setattr(http_session, "RETRY_DELAY", 0.01)  # the closed port below is asked again

    endpoint, _ = hub

    def unreadable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(model / "model-00001.safetensors"))

    monkeypatch.setattr(snapshot, "judge", unreadable)
    p = {"path": str(model), "repo_id": REPO_ID, "revision": REV, "endpoint": endpoint, "token": None, "timeout": 10}
    with pytest.raises(PermissionError):
        model_check.check(p, "test")
    got = sglang_probe.check_model(p)
    assert "could not be judged" in got["msg"] and "Permission denied" in got["msg"], got
    assert "could not list" not in got["msg"]
    with pytest.raises(model_check.ListingError, match="could not list org/model"):
        model_check.check(dict(p, endpoint="http://127.0.0.1:9"), "test")


def test_a_listing_the_hub_refuses_for_a_passing_reason_is_asked_again(model):
    """A 503 and a 429 (the Hub's rate limit), then the listing: the module judges the copy as if the first answer
    had been the listing (one second's wait, then two)."""
    with serve_in_turn((503, b"busy"), (429, b"slow down"), (200, hub_listing())) as (endpoint, asked):
        got = snap(model, endpoint)
    assert not got.get("failed") and got["missing"] == [], got
    assert len(asked) == 3


def test_a_hub_that_keeps_failing_is_named_with_how_often_it_was_asked(model, monkeypatch):
    from ansible_collections.blackwell.serving.plugins.module_utils import http_session, model_check

    monkeypatch.setattr(http_session, "RETRY_DELAY", 0.01)
    p = {"path": str(model), "repo_id": REPO_ID, "revision": REV, "token": None, "timeout": 10}
    with serve_in_turn((503, b"busy")) as (endpoint, asked):
        with pytest.raises(model_check.ListingError, match=r"HTTP Error 503.*\(asked 4 times\)"):
            model_check.check(dict(p, endpoint=endpoint), "test")
    assert len(asked) == 4
    # a 404 is an answer: asked once, and said without a count
    with serve_in_turn((404, b"not found")) as (endpoint, asked):
        with pytest.raises(model_check.ListingError) as exc:
            model_check.check(dict(p, endpoint=endpoint), "test")
    assert len(asked) == 1 and "HTTP Error 404" in str(exc.value) and "asked" not in str(exc.value)
