"""A stand-in for the Hugging Face Hub's download endpoints, serving a small synthetic model.

It answers what ``hf download REPO --revision SHA --local-dir DIR`` asks
(huggingface_hub 1.x): the repository's revision and tree listings under
``/api/models/...`` and the files under ``/REPO/resolve/REV/PATH`` with the
headers the client reads (``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag``,
``X-Linked-Size``), ``HEAD``, and ``Range`` for resumed downloads. The model
is gated: every request needs ``Authorization: Bearer TOKEN``, as a gated or
private repository on the Hub does, so that the lab proves the token is
passed. Files are sent at a bounded rate so that a download lasts long
enough to show progress; ``/_lab/rate?bytes_per_s=N`` changes that rate (the
slowed mode of benchmarks/time_to_serving.py). ``/_lab/stats`` counts the bytes
sent per file and in all (a resumed download asks only for what is missing; a
site cache makes the fleet's whole egress one copy); ``/_lab/reset`` zeroes it.

Two revisions are served: the one the lab pins (``HUB.sha``) and a later one
(``HUB.next_sha``) whose shards are the same and whose generation config
changed, as a model repository's small fix does: a re-pin of the model
revision in the lab fleet moves to it.

The model is written for the lab: a config that names GLM-5's architecture
and model type, a tokenizer stub and three small safetensors shards of
deterministic bytes. It is not GLM-5 and loads in nothing but the lab's
stand-in server. The revision id is derived from the content, so it is the
same on every machine (tests/unit/test_lab_hub.py holds it to inventories/lab).
"""
from __future__ import annotations

import hashlib
import json
import random
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

from . import stack

# the repository the stack pins (model_weights_repo_id), served as the Hub would
REPO_ID = stack.pin("model_weights_repo_id")
TOKEN = "hf_lab_standin_token_not_a_secret"
PREFIX = "/hub"
SHARDS = 3
SHARD_BYTES = 24 * 1024 * 1024
RATE_BYTES_PER_S = 4 * 1024 * 1024
LFS_SUFFIXES = (".safetensors",)


@dataclass(frozen=True)
class RepoFile:
    path: str
    data: bytes

    @property
    def lfs(self) -> bool:
        return self.path.endswith(LFS_SUFFIXES)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_oid(self) -> str:
        """The git blob id of what the repository stores: the content, or the LFS pointer."""
        blob = self.pointer() if self.lfs else self.data
        return hashlib.sha1(b"blob %d\0" % len(blob) + blob).hexdigest()

    def pointer(self) -> bytes:
        return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\n"
                f"size {len(self.data)}\n").encode()

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.git_oid

    def tree_entry(self) -> dict:
        entry = {"type": "file", "oid": self.git_oid, "size": len(self.data), "path": self.path}
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": len(self.pointer())}
        return entry


def _safetensors(name: str, nbytes: int, seed: int) -> bytes:
    header = json.dumps({"__metadata__": {"format": "pt", "lab_standin": "blackwell.serving"},
                         name: {"dtype": "U8", "shape": [nbytes], "data_offsets": [0, nbytes]}},
                        separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    rng = random.Random(seed)
    return struct.pack("<Q", len(header)) + header + rng.randbytes(nbytes)


def model_files(later: bool = False) -> list[RepoFile]:
    """The files of the pinned revision, or with ``later`` those of the revision after it."""
    shards = {f"model-{i:05d}-of-{SHARDS:05d}.safetensors": f"model.layers.{i - 1}.lab_weight"
              for i in range(1, SHARDS + 1)}
    weight_map = {tensor: shard for shard, tensor in shards.items()}
    config = {
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "max_position_embeddings": 202752,
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
        "torch_dtype": "bfloat16",
        "lab_standin": "a synthetic model for the blackwell.serving lab, not GLM-5",
    }
    texts = {
        ".gitattributes": "*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": "# GLM-5-NVFP4 (lab stand-in)\n\nSynthetic files shaped like the model repository, "
                     "written for the blackwell.serving lab.\n",
        "config.json": json.dumps(config, indent=2) + "\n",
        "generation_config.json": json.dumps({"eos_token_id": [154820], "temperature": 0.7 if later else 1.0},
                                             indent=2) + "\n",
        "tokenizer_config.json": json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                             "model_max_length": 202752}, indent=2) + "\n",
        "model.safetensors.index.json": json.dumps({"metadata": {"total_size": SHARDS * SHARD_BYTES},
                                                    "weight_map": weight_map}, indent=2) + "\n",
    }
    files = [RepoFile(p, t.encode()) for p, t in texts.items()]
    files += [RepoFile(p, _safetensors(tensor, SHARD_BYTES, seed=i))
              for i, (p, tensor) in enumerate(shards.items(), start=1)]
    return sorted(files, key=lambda f: f.path)


def revision(files: list[RepoFile]) -> str:
    """A commit-like id of the content: the same files give the same id."""
    h = hashlib.sha1()
    for f in files:
        h.update(f"{f.path}\0{f.git_oid}\0".encode())
    return h.hexdigest()


class Hub:
    """The one repository, its revision, and what was sent."""

    def __init__(self) -> None:
        self.files = {f.path: f for f in model_files()}
        self.sha = revision(list(self.files.values()))
        later = {f.path: f for f in model_files(later=True)}
        self.next_sha = revision(list(later.values()))
        self.revisions = {self.sha: self.files, self.next_sha: later, "main": self.files}
        # what was sent, per client address and file: tests that run side by side (two pytest workers, one
        # Hub) each read and reset the counts of their own hosts only
        self.sent_to: dict[str, dict[str, int]] = {}
        self.lock = threading.Lock()

    def count(self, path: str, n: int, client: str = "") -> None:
        with self.lock:
            files = self.sent_to.setdefault(client, {})
            files[path] = files.get(path, 0) + n

    def stats(self, clients: list[str] | None = None) -> tuple[dict[str, int], int]:
        """What was sent to these clients (every client when None), per file and in all."""
        sent: dict[str, int] = {}
        with self.lock:
            for client, files in self.sent_to.items():
                if clients is None or client in clients:
                    for path, n in files.items():
                        sent[path] = sent.get(path, 0) + n
        return sent, sum(sent.values())

    def reset(self, clients: list[str] | None = None) -> None:
        with self.lock:
            for client in list(self.sent_to):
                if clients is None or client in clients:
                    del self.sent_to[client]


HUB = Hub()


def handle(h: BaseHTTPRequestHandler, head: bool = False) -> None:
    """Answer one request under PREFIX (the caller checked the prefix)."""
    url = urlsplit(h.path)
    path = unquote(url.path[len(PREFIX):])

    def reply(code: int, body: bytes | dict | list = b"", headers: dict | None = None) -> None:
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        h.send_response(code)
        h.send_header("Content-Type", "application/json" if isinstance(body, (dict, list)) else "text/plain")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if not head:
            h.wfile.write(data)

    global RATE_BYTES_PER_S
    # ?clients=A,B: only what was sent to those addresses; ?me=1: only what was sent to the asker's
    query = dict(q.split("=", 1) for q in url.query.split("&") if "=" in q)
    clients = ([h.client_address[0]] if query.get("me") else
               [c for c in query["clients"].split(",") if c] if "clients" in query else None)
    if path == "/_lab/stats":
        sent, total = HUB.stats(clients)
        return reply(200, {"revision": HUB.sha, "next_revision": HUB.next_sha, "sent": sent, "sent_total": total,
                           "one_copy": sum(len(f.data) for f in HUB.files.values()), "bytes_per_s": RATE_BYTES_PER_S,
                           "client": h.client_address[0]})
    if path == "/_lab/reset":
        HUB.reset(clients)
        return reply(200, {"reset": True})
    if path == "/_lab/rate":
        if not query.get("bytes_per_s", "").isdigit() or int(query["bytes_per_s"]) <= 0:
            return reply(400, {"error": "give ?bytes_per_s=N, N > 0"})
        RATE_BYTES_PER_S = int(query["bytes_per_s"])
        return reply(200, {"bytes_per_s": RATE_BYTES_PER_S})
    if h.headers.get("Authorization") != f"Bearer {TOKEN}":
        return reply(401, {"error": f"Access to model {REPO_ID} is restricted. You must have access to it "
                                    "and be authenticated to access it."},
                     {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access restricted: gated repository"})

    api = f"/api/models/{REPO_ID}/"
    if path.startswith(api):
        rest = path[len(api):]
        kind, _, rev_and_path = rest.partition("/")
        rev, _, sub = rev_and_path.partition("/")
        if rev not in HUB.revisions:
            return reply(404, {"error": f"Invalid rev id: {rev}"},
                         {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"})
        files = HUB.revisions[rev]
        sha = HUB.sha if rev == "main" else rev
        if kind == "revision":
            siblings = [{"rfilename": f.path, "size": len(f.data), "blobId": f.git_oid,
                         **({"lfs": f.tree_entry()["lfs"]} if f.lfs else {})} for f in files.values()]
            return reply(200, {"_id": "lab", "id": REPO_ID, "modelId": REPO_ID, "sha": sha, "private": False,
                               "gated": "manual", "disabled": False, "downloads": 0, "likes": 0, "tags": [],
                               "library_name": "transformers", "lastModified": "2026-03-01T00:00:00.000Z",
                               "createdAt": "2026-02-20T00:00:00.000Z", "siblings": siblings,
                               "usedStorage": sum(len(f.data) for f in files.values())})
        if kind == "tree":
            prefix = sub.strip("/")
            entries = [f.tree_entry() for f in files.values()
                       if not prefix or f.path.startswith(prefix + "/")]
            return reply(200, entries)
        return reply(404, {"error": f"not found: {path}"})

    resolve = f"/{REPO_ID}/resolve/"
    if path.startswith(resolve):
        rev, _, fpath = path[len(resolve):].partition("/")
        if rev not in HUB.revisions:
            return reply(404, {"error": f"Invalid rev id: {rev}"}, {"X-Error-Code": "RevisionNotFound"})
        sha = HUB.sha if rev == "main" else rev
        f = HUB.revisions[rev].get(fpath)
        if f is None:
            return reply(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        start, end = 0, len(f.data) - 1
        code = 200
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            start = int(first) if first else 0
            end = int(last) if last else end
            code = 206
        body = f.data[start:end + 1]
        h.send_response(code)
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(body)),
                   "Accept-Ranges": "bytes", "X-Repo-Commit": sha, "ETag": f'"{f.etag}"'}
        if f.lfs:
            headers.update({"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(len(f.data))})
        if code == 206:
            headers["Content-Range"] = f"bytes {start}-{end}/{len(f.data)}"
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        if head:
            return None
        chunk = 256 * 1024
        for off in range(0, len(body), chunk):
            piece = body[off:off + chunk]
            # counted before it is written: the client can have the last byte before a count after the write ran
            HUB.count(fpath, len(piece), h.client_address[0])
            try:
                h.wfile.write(piece)
            except (BrokenPipeError, ConnectionResetError):
                HUB.count(fpath, -len(piece), h.client_address[0])
                return None
            time.sleep(len(piece) / RATE_BYTES_PER_S)
        return None
    return reply(404, {"error": f"not found: {path}"})


def write_expected(root: Path) -> None:
    """Record the revision and manifest beside the served tree, for people and tests."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "hub-revision.txt").write_text(f"{REPO_ID} {HUB.sha}\n")
