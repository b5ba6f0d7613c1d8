"""The site's model cache (roles/model_weights/files/model_cache.py): what it serves is what the Hub serves, for
the revisions verified on it only, gated by the site's token, resumable."""
import functools
import importlib.util
import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import snapshot
from conftest import REPO
from lab import hub
from lab.serve import QuietHandler
from test_lab_hub import get

spec = importlib.util.spec_from_file_location("model_cache", REPO / "roles/model_weights/files/model_cache.py")
model_cache = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model_cache)

TOKEN = "site-token"


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def hub_url(tmp_path_factory):
    rate, hub.RATE_BYTES_PER_S = hub.RATE_BYTES_PER_S, 1 << 40
    server, base = serve(functools.partial(QuietHandler, directory=str(tmp_path_factory.mktemp("www"))))
    yield base + hub.PREFIX
    server.shutdown()
    hub.RATE_BYTES_PER_S = rate


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache holding the pinned revision, verified (its marker written as the role writes it), and a
    directory of the later revision with no marker (a download not verified yet)."""
    root = tmp_path_factory.mktemp("revisions")
    rev = root / hub.HUB.sha
    for f in hub.HUB.files.values():
        (rev / f.path).parent.mkdir(parents=True, exist_ok=True)
        (rev / f.path).write_bytes(f.data)
    manifest = snapshot.normalise_manifest([f.tree_entry() for f in hub.HUB.files.values()])
    judged = snapshot.judge(str(rev), manifest, verify=True)
    assert judged["complete"]
    (rev / snapshot.MARKER).write_text(snapshot.marker_content(hub.REPO_ID, hub.HUB.sha, manifest, judged["records"]))
    (root / hub.HUB.next_sha).mkdir()
    (root / hub.HUB.next_sha / "config.json").write_text("{}")
    server, base = serve(model_cache.make_handler(model_cache.Revisions(str(root), hub.REPO_ID), TOKEN))
    yield base, root
    server.shutdown()


AUTH = {"Authorization": f"Bearer {TOKEN}"}
HUB_AUTH = {"Authorization": f"Bearer {hub.TOKEN}"}


def test_its_listings_are_the_hubs(cache, hub_url):
    base, _ = cache
    for kind, query in (("tree", "?recursive=true"), ("revision", "")):
        code, _, body = get(f"{base}/api/models/{hub.REPO_ID}/{kind}/{hub.HUB.sha}{query}", AUTH)
        assert code == 200
        _, _, from_hub = get(f"{hub_url}/api/models/{hub.REPO_ID}/{kind}/{hub.HUB.sha}{query}", HUB_AUTH)
        if kind == "tree":
            assert sorted(json.loads(body), key=lambda e: e["path"]) == \
                sorted(json.loads(from_hub), key=lambda e: e["path"])
        else:
            mine, theirs = json.loads(body), json.loads(from_hub)
            assert mine["sha"] == theirs["sha"] == hub.HUB.sha
            key = lambda s: s["rfilename"]  # noqa: E731
            assert sorted(mine["siblings"], key=key) == sorted(theirs["siblings"], key=key)


def test_files_and_headers_are_the_hubs(cache, hub_url):
    base, _ = cache
    for f in hub.HUB.files.values():
        code, headers, data = get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{f.path}", AUTH)
        _, hub_headers, _ = get(f"{hub_url}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{f.path}", HUB_AUTH, method="HEAD")
        assert code == 200 and data == f.data
        for h in ("X-Repo-Commit", "ETag", "X-Linked-Etag", "X-Linked-Size", "Content-Length"):
            assert headers.get(h) == hub_headers.get(h), (f.path, h)
        code, headers, body = get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{f.path}", AUTH, method="HEAD")
        assert code == 200 and body == b"" and headers["Content-Length"] == str(len(f.data))


def test_a_range_resumes(cache):
    base, _ = cache
    shard = next(f for f in hub.HUB.files.values() if f.lfs)
    url = f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{shard.path}"
    code, headers, body = get(url, {**AUTH, "Range": "bytes=1000-"})
    assert code == 206 and body == shard.data[1000:]
    assert headers["Content-Range"] == f"bytes 1000-{len(shard.data) - 1}/{len(shard.data)}"
    code, _, body = get(url, {**AUTH, "Range": "bytes=10-19"})
    assert code == 206 and body == shard.data[10:20]
    assert get(url, {**AUTH, "Range": f"bytes={len(shard.data)}-"})[0] == 416


def test_only_verified_revisions_and_their_listed_files(cache):
    base, root = cache
    code, headers, _ = get(f"{base}/api/models/{hub.REPO_ID}/tree/{hub.HUB.next_sha}", AUTH)
    assert code == 404 and headers["X-Error-Code"] == "RevisionNotFound"
    assert get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.next_sha}/config.json", AUTH)[0] == 404
    assert get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/{snapshot.MARKER}", AUTH)[0] == 404
    assert get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/../{hub.HUB.sha}/config.json", AUTH)[0] == 404
    assert get(f"{base}/api/models/other/repo/tree/{hub.HUB.sha}", AUTH)[0] == 404


def test_a_file_changed_since_it_was_verified_is_not_served(cache):
    base, root = cache
    target = root / hub.HUB.sha / "README.md"
    data = target.read_bytes()
    target.write_bytes(data + b"tampered")
    try:
        assert get(f"{base}/{hub.REPO_ID}/resolve/{hub.HUB.sha}/README.md", AUTH)[0] == 503
    finally:
        target.write_bytes(data)


def test_without_the_sites_token_it_is_closed(cache):
    base, _ = cache
    url = f"{base}/api/models/{hub.REPO_ID}/tree/{hub.HUB.sha}"
    assert get(url)[0] == 401
    assert get(url, {"Authorization": "Bearer wrong"})[0] == 401
