# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The site's model cache: serves verified revisions to the site's servers as the Hub serves them.

Deployed by the model_weights role (entry point ``cache``) on the hosts of the site's cache group, which
download each revision from the Hub once and verify it there. It answers what ``hf download REPO --revision SHA
--local-dir DIR`` asks of its endpoint (``HF_ENDPOINT``): the revision's information and its tree listing under
``/api/models/REPO/``, and every file under ``/REPO/resolve/SHA/PATH`` with the headers the client reads
(``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag``, ``X-Linked-Size``), ``HEAD``, and ``Range`` (an interrupted
download resumes where it stopped).

Only what was verified is served: a revision is listed from the marker (``.blackwell-snapshot.json``) that the
role writes once every file matched the Hub's manifest, and only the files that manifest names. Every server
still verifies every file against the Hub's manifest itself. With ``--token-file`` a request must carry
``Authorization: Bearer TOKEN``, the site's Hub token, as a gated repository on the Hub does.

Standard library only: it runs with the host's python3.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

MARKER = ".blackwell-snapshot.json"
SHA = re.compile(r"^[0-9a-f]{40}$")


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer the repository stores for a large file (its tree listing's oid is this blob's)."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Revisions:
    """The verified revisions under root (one directory per revision, each with the role's marker)."""

    def __init__(self, root: str, repo_id: str) -> None:
        self.root, self.repo_id = root, repo_id

    def manifest(self, revision: str) -> list[dict] | None:
        if not SHA.match(revision):
            return None
        try:
            with open(os.path.join(self.root, revision, MARKER), encoding="utf-8") as fh:
                marker = json.load(fh)
        except (OSError, ValueError):
            return None
        if not isinstance(marker, dict) or marker.get("repo_id") != self.repo_id \
                or marker.get("revision") != revision or not isinstance(marker.get("manifest"), list):
            return None
        return marker["manifest"]

    def entry(self, revision: str, path: str) -> dict | None:
        for e in self.manifest(revision) or []:
            if e.get("path") == path:
                return e
        return None


def tree_entry(e: dict) -> dict:
    out = {"type": "file", "path": e["path"], "size": e["size"]}
    if "sha256" in e:
        out["oid"] = git_blob_id(lfs_pointer(e["sha256"], e["size"]))
        out["lfs"] = {"oid": e["sha256"], "size": e["size"], "pointerSize": len(lfs_pointer(e["sha256"], e["size"]))}
    else:
        out["oid"] = e["git_oid"]
    return out


def make_handler(revisions: Revisions, token: str | None):
    repo = revisions.repo_id

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "blackwell-model-cache"

        def log_message(self, fmt, *args):  # one line per request on stderr, the journal's
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

        def reply(self, code: int, body: dict | list | bytes = b"", headers: dict | None = None,
                  head: bool = False) -> None:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            self.send_response(code)
            self.send_header("Content-Type", "application/json" if isinstance(body, (dict, list)) else "text/plain")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head:
                self.wfile.write(data)

        def not_found(self, what: str, code: str, head: bool) -> None:
            self.reply(404, {"error": what}, {"X-Error-Code": code, "X-Error-Message": what}, head)

        def do_HEAD(self) -> None:
            self.answer(head=True)

        def do_GET(self) -> None:
            self.answer(head=False)

        def answer(self, head: bool) -> None:
            url = urlsplit(self.path)
            path = unquote(url.path)
            if token is not None:
                given = self.headers.get("Authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return self.reply(401, {"error": f"Access to model {repo} is restricted: send the site's "
                                                     "Hub token."}, {"X-Error-Code": "GatedRepo"}, head)
            api = f"/api/models/{repo}/"
            if path.startswith(api):
                kind, _sep, rest = path[len(api):].partition("/")
                revision, _sep, sub = rest.partition("/")
                manifest = revisions.manifest(revision)
                if manifest is None:
                    return self.not_found(f"Invalid rev id: {revision} (not verified on this cache)",
                                          "RevisionNotFound", head)
                if kind == "revision":
                    siblings = [{"rfilename": t["path"], "size": t["size"], "blobId": t["oid"],
                                 **({"lfs": t["lfs"]} if "lfs" in t else {})} for t in map(tree_entry, manifest)]
                    return self.reply(200, {"id": repo, "modelId": repo, "sha": revision, "private": True,
                                            "siblings": siblings}, head=head)
                if kind == "tree":
                    prefix = sub.strip("/")
                    return self.reply(200, [tree_entry(e) for e in manifest
                                            if not prefix or e["path"].startswith(prefix + "/")], head=head)
                return self.not_found(f"not found: {path}", "EntryNotFound", head)
            resolve = f"/{repo}/resolve/"
            if path.startswith(resolve):
                revision, _sep, fpath = path[len(resolve):].partition("/")
                if revisions.manifest(revision) is None:
                    return self.not_found(f"Invalid rev id: {revision} (not verified on this cache)",
                                          "RevisionNotFound", head)
                e = revisions.entry(revision, fpath)
                if e is None:
                    return self.not_found(f"Entry not found: {fpath}", "EntryNotFound", head)
                return self.send_file(revision, e, head)
            return self.not_found(f"not found: {path}", "EntryNotFound", head)

        def send_file(self, revision: str, e: dict, head: bool) -> None:
            full = os.path.join(revisions.root, revision, e["path"])
            try:
                fh = open(full, "rb")
            except OSError:
                return self.not_found(f"Entry not found: {e['path']}", "EntryNotFound", head)
            with fh:
                size = os.fstat(fh.fileno()).st_size
                if size != e["size"]:  # changed on disk since it was verified: never serve it
                    return self.reply(503, {"error": f"{e['path']} changed on the cache since it was verified"},
                                      head=head)
                start, end, code = 0, size - 1, 200
                rng = self.headers.get("Range", "")
                m = re.match(r"^bytes=(\d*)-(\d*)$", rng.strip())
                if m and (m.group(1) or m.group(2)):
                    if m.group(1):
                        start = int(m.group(1))
                        end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                    else:  # the last N bytes
                        start = max(size - int(m.group(2)), 0)
                    if start > end or start >= size:
                        return self.reply(416, b"", {"Content-Range": f"bytes */{size}"}, head)
                    code = 206
                etag = e.get("sha256") or e.get("git_oid")
                headers = {"Content-Type": "application/octet-stream", "Content-Length": str(end - start + 1),
                           "Accept-Ranges": "bytes", "X-Repo-Commit": revision, "ETag": f'"{etag}"'}
                if "sha256" in e:
                    headers.update({"X-Linked-Etag": f'"{e["sha256"]}"', "X-Linked-Size": str(size)})
                if code == 206:
                    headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if head:
                    return None
                try:
                    self.wfile.flush()
                    self.connection.sendfile(fh, offset=start, count=end - start + 1)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
            return None

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Serve verified model revisions as the Hub does (HF_ENDPOINT).")
    ap.add_argument("--root", required=True, help="the directory of the revisions (one directory per revision)")
    ap.add_argument("--repo-id", required=True, help="the model repository, ORG/NAME")
    ap.add_argument("--address", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8690)
    ap.add_argument("--token-file", help="a file holding the token every request must carry")
    args = ap.parse_args(argv)
    token = None
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as fh:
            token = fh.read().strip()
    server = ThreadingHTTPServer((args.address, args.port), make_handler(Revisions(args.root, args.repo_id), token))
    server.daemon_threads = True
    sys.stderr.write(f"serving the verified revisions of {args.repo_id} under {args.root} on "
                     f"{args.address}:{args.port}\n")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
