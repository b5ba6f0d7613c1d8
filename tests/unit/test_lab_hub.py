"""The Hub stand-in: gated like a private repository, its manifest true to its files, ranges for resumes."""
import json
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.blackwell.serving.plugins.module_utils import snapshot
from conftest import REPO
from lab import hub
from lab.serve import QuietHandler

AUTH = {"Authorization": f"Bearer {hub.TOKEN}"}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    import functools
    # the lab sends slowly so that progress shows; these tests need no such wait
    rate, hub.RATE_BYTES_PER_S = hub.RATE_BYTES_PER_S, 1 << 40
    handler = functools.partial(QuietHandler, directory=str(tmp_path_factory.mktemp("www")))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}{hub.PREFIX}"
    server.shutdown()
    hub.RATE_BYTES_PER_S = rate


def get(url, headers=None, method="GET"):
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_lab_inventory_pins_the_stand_in_revision():
    stack = yaml.safe_load((REPO / "inventories/lab/group_vars/all/stack.yml").read_text())
    assert stack["model_weights_revision"] == hub.HUB.sha
    assert stack["model_weights_repo_id"] == hub.REPO_ID
    lab = yaml.safe_load((REPO / "inventories/lab/group_vars/all/lab.yml").read_text())
    assert lab["model_weights_token"] == hub.TOKEN


def test_revision_is_stable_and_follows_content():
    files = hub.model_files()
    assert hub.revision(files) == hub.HUB.sha
    changed = [hub.RepoFile(f.path, f.data + b" ") if f.path == "config.json" else f for f in files]
    assert hub.revision(changed) != hub.HUB.sha


def test_without_a_token_the_repository_is_closed(base):
    code, headers, _ = get(f"{base}/api/models/{hub.REPO_ID}/tree/{hub.HUB.sha}?recursive=true")
    assert code == 401 and headers.get("X-Error-Code") == "GatedRepo"


def test_manifest_matches_what_is_served(base, tmp_path):
    code, _, body = get(f"{base}/api/models/{hub.REPO_ID}/tree/{hub.HUB.sha}?recursive=true", AUTH)
    assert code == 200
    manifest = snapshot.normalise_manifest(json.loads(body))
    for entry in manifest:
        code, headers, data = get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{entry['path']}", AUTH)
        assert code == 200 and headers["X-Repo-Commit"] == hub.HUB.sha
        (tmp_path / entry["path"]).write_bytes(data)
    assert snapshot.compare(tmp_path, manifest, verify=True)["complete"]
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["GlmMoeDsaForCausalLM"] and cfg["model_type"] == "glm_moe_dsa"


def test_head_and_range(base):
    shard = next(p for p in hub.HUB.files if p.endswith(".safetensors"))
    url = f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{shard}"
    code, headers, body = get(url, AUTH, method="HEAD")
    assert code == 200 and body == b"" and headers["X-Linked-Size"] == str(len(hub.HUB.files[shard].data))
    assert headers["X-Linked-Etag"].strip('"') == hub.HUB.files[shard].sha256
    code, headers, body = get(url, {**AUTH, "Range": "bytes=10-19"})
    assert code == 206 and body == hub.HUB.files[shard].data[10:20]
    assert headers["Content-Range"].startswith("bytes 10-19/")


def test_unknown_revision_is_not_found(base):
    code, headers, _ = get(f"{base}/api/models/{hub.REPO_ID}/tree/{'0' * 40}", AUTH)
    assert code == 404 and headers.get("X-Error-Code") == "RevisionNotFound"


def test_the_later_revision_shares_the_shards_and_differs_in_a_small_file(base, tmp_path):
    """What the lab fleet re-pins the model to: its own manifest, its own commit, the same large files."""
    assert hub.HUB.next_sha != hub.HUB.sha and len(hub.HUB.next_sha) == 40
    code, _, body = get(f"{base}/api/models/{hub.REPO_ID}/tree/{hub.HUB.next_sha}?recursive=true", AUTH)
    assert code == 200
    later = {e["path"]: e for e in snapshot.normalise_manifest(json.loads(body))}
    _, _, body = get(f"{base}/api/models/{hub.REPO_ID}/tree/{hub.HUB.sha}?recursive=true", AUTH)
    pinned = {e["path"]: e for e in snapshot.normalise_manifest(json.loads(body))}
    assert later.keys() == pinned.keys()
    assert [p for p in later if later[p] != pinned[p]] == ["generation_config.json"]
    code, headers, data = get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.next_sha}/generation_config.json", AUTH)
    assert code == 200 and headers["X-Repo-Commit"] == hub.HUB.next_sha and json.loads(data)["temperature"] == 0.7


def test_stats_count_every_byte_sent_and_the_rate_can_be_slowed(base):
    get(f"{base}/_lab/reset")
    shard = next(p for p in hub.HUB.files if p.endswith(".safetensors"))
    get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{shard}", {**AUTH, "Range": "bytes=0-999"})
    get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/config.json", AUTH)
    _, _, body = get(f"{base}/_lab/stats")
    stats = json.loads(body)
    assert stats["sent"][shard] == 1000
    assert stats["sent_total"] == 1000 + len(hub.HUB.files["config.json"].data)
    assert stats["one_copy"] == sum(len(f.data) for f in hub.HUB.files.values())
    # per client: what one test's hosts were sent, whatever another worker's hosts download meanwhile
    assert json.loads(get(f"{base}/_lab/stats?me=1")[2])["sent_total"] == stats["sent_total"]
    assert json.loads(get(f"{base}/_lab/stats?clients=127.0.0.1")[2])["sent"] == stats["sent"]
    assert json.loads(get(f"{base}/_lab/stats?clients=10.9.9.9")[2])["sent_total"] == 0
    get(f"{base}/_lab/reset?clients=10.9.9.9")
    assert json.loads(get(f"{base}/_lab/stats")[2])["sent_total"] == stats["sent_total"]
    get(f"{base}/_lab/reset?me=1")
    assert json.loads(get(f"{base}/_lab/stats")[2])["sent_total"] == 0
    before = hub.RATE_BYTES_PER_S
    try:
        code, _, body = get(f"{base}/_lab/rate?bytes_per_s=12345")
        assert code == 200 and hub.RATE_BYTES_PER_S == 12345
        assert get(f"{base}/_lab/rate?bytes_per_s=0")[0] == 400
    finally:
        hub.RATE_BYTES_PER_S = before
