# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Judge a local copy of a model repository against its revision's manifest.

Pure functions, no Ansible imports: the module ``model_snapshot`` fetches the
manifest (the Hub's tree listing of one revision) and calls these.

A manifest is a list of ``{"path", "size", "oid", "lfs": {"oid": sha256}}``
entries, as the Hub's ``/api/models/REPO/tree/REV?recursive=true`` lists them.
A large (LFS) file is verified by the SHA-256 of its content; a small one by
its git blob id (SHA-1 of ``blob <size>\\0`` and the content).

Once every file verified, a marker file records the repository, the revision
and the manifest; a later run that finds the marker and every file at its
recorded size is complete without reading the files or asking the Hub.
"""
from __future__ import annotations

import hashlib
import json
import os

MARKER = ".blackwell-snapshot.json"
CHUNK = 8 * 1024 * 1024
# what the download client keeps beside the files (partial downloads, locks, metadata)
IGNORED_DIRS = (".cache",)


class ManifestError(ValueError):
    """The listing is not a manifest this module understands."""


def normalise_manifest(entries):
    """Keep the files of a tree listing, each with path, size and how to verify it."""
    if not isinstance(entries, list):
        raise ManifestError("the tree listing is not a list")
    files = []
    for e in entries:
        if not isinstance(e, dict) or e.get("type", "file") != "file":
            continue
        try:
            path, size = e["path"], int(e["size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"entry without path or size: {e!r}") from exc
        if path.startswith("/") or ".." in path.split("/"):
            raise ManifestError(f"entry with an unsafe path: {path!r}")
        lfs = e.get("lfs") or {}
        if lfs.get("oid"):
            files.append({"path": path, "size": size, "sha256": lfs["oid"]})
        elif e.get("oid"):
            files.append({"path": path, "size": size, "git_oid": e["oid"]})
        else:
            raise ManifestError(f"entry {path!r} has no object id to verify it by")
    if not files:
        raise ManifestError("the revision lists no files")
    return sorted(files, key=lambda f: f["path"])


def hash_file(path, algo, git_blob_size=None):
    h = hashlib.new(algo)
    if git_blob_size is not None:
        h.update(b"blob %d\0" % git_blob_size)
    with open(path, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def file_state(root, entry, verify):
    """``ok``, ``missing``, ``size`` (wrong size) or ``hash`` (right size, wrong content)."""
    full = os.path.join(root, entry["path"])
    try:
        size = os.stat(full).st_size
    except FileNotFoundError:
        return "missing"
    if size != entry["size"]:
        return "size"
    if not verify:
        return "ok"
    if "sha256" in entry:
        good = hash_file(full, "sha256") == entry["sha256"]
    else:
        good = hash_file(full, "sha1", git_blob_size=size) == entry["git_oid"]
    return "ok" if good else "hash"


def compare(root, manifest, verify):
    """Judge every file of the manifest under root; sizes only unless verify."""
    states = {e["path"]: file_state(root, e, verify) for e in manifest}
    total = sum(e["size"] for e in manifest)
    good = sum(e["size"] for e in manifest if states[e["path"]] == "ok")
    bad = {p: s for p, s in states.items() if s != "ok"}
    return {
        "complete": not bad,
        "files": len(manifest),
        "total_bytes": total,
        "verified_bytes": good,
        "needed_bytes": total - good,
        "missing": sorted(p for p, s in bad.items() if s == "missing"),
        "wrong_size": sorted(p for p, s in bad.items() if s == "size"),
        "wrong_hash": sorted(p for p, s in bad.items() if s == "hash"),
    }


def read_marker(root):
    try:
        with open(os.path.join(root, MARKER), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def marker_matches(marker, repo_id, revision):
    return bool(marker) and marker.get("repo_id") == repo_id and marker.get("revision") == revision \
        and isinstance(marker.get("manifest"), list)


def marker_content(repo_id, revision, manifest):
    return json.dumps({"repo_id": repo_id, "revision": revision, "manifest": manifest}, indent=1,
                      sort_keys=True) + "\n"


def present_bytes(root):
    """Bytes on disk under root, partial downloads included (for progress)."""
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total


def extra_files(root, manifest):
    """Files under root that the revision does not list (the marker and the client's .cache aside)."""
    listed = {e["path"] for e in manifest} | {MARKER}
    extra = []
    for dirpath, dirs, names in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirs[:] = [d for d in dirs if d not in IGNORED_DIRS]
        for n in names:
            rel = n if rel_dir == "." else os.path.join(rel_dir, n)
            if rel not in listed:
                extra.append(rel)
    return sorted(extra)


def human_bytes(n):
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def progress_line(done, total, elapsed, rate=None):
    """``3.2 GiB of 410.0 GiB (0.8%), 112.0 MiB/s, about 1 h 2 min left`` (rate in bytes per second)."""
    # what is on disk includes the client's own files: never say more than all of it
    done = min(done, total)
    pct = 100.0 * done / total if total else 100.0
    text = f"{human_bytes(done)} of {human_bytes(total)} ({pct:.1f}%)"
    if rate is None and elapsed > 0:
        rate = done / elapsed
    if rate and rate > 0:
        text += f", {human_bytes(rate)}/s"
        left = max(total - done, 0) / rate
        text += ", about " + human_duration(left) + " left"
    return text


def human_duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"
