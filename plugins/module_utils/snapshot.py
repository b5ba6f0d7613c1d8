# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Judge a local copy of a model repository against its revision's manifest.

Pure functions, no Ansible imports: the module ``model_snapshot`` fetches the
manifest (the Hub's tree listing of one revision) and calls these.

A manifest is a list of ``{"path", "size", "oid", "lfs": {"oid": sha256}}``
entries, as the Hub's ``/api/models/REPO/tree/REV?recursive=true`` lists them.
A large (LFS) file is verified by the SHA-256 of its content; a small one by
its git blob id (SHA-1 of ``blob <size>\\0`` and the content).

Once every file verified, a marker file records the repository, the revision,
the manifest and, per file, what was found when its content was hashed: size,
modification and change times, inode and the hash. A later run that finds every
file as recorded is complete without reading the files or asking the Hub; a file
whose record differs (re-downloaded, rewritten, touched) is hashed again, and a
full re-hash reads every file whatever the records say.
"""
from __future__ import annotations

import hashlib
import json
import os

MARKER = ".blackwell-snapshot.json"
# what a repair leaves in the revision's directory: the files it removed to fetch them again, and when (a service
# that reads the directory restarts when it changed since the service started)
REPAIRS = ".blackwell-repairs.json"
# the download client's record of each finished file (huggingface_hub's local-dir mode): a file removed for a repair
# loses its record too, so that the client fetches it again
CLIENT_METADATA = os.path.join(".cache", "huggingface", "download")
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


def hash_file(path, algo, git_blob_size=None, progress=None):
    h = hashlib.new(algo)
    if git_blob_size is not None:
        h.update(b"blob %d\0" % git_blob_size)
    with open(path, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            h.update(block)
            if progress:
                progress(len(block))
    return h.hexdigest()


def expected_hash(entry):
    """The hash the manifest gives a file: SHA-256 of an LFS file, else its git blob id."""
    return entry.get("sha256") or entry.get("git_oid")


def stat_record(full):
    """What the marker keeps of a file besides its hash; any write, rename or touch changes one of these
    (the change time even when the modification time is set back)."""
    st = os.stat(full)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino}


def unchanged(record, found, entry):
    """Whether a file is as the marker recorded it when its content matched the manifest's hash."""
    return isinstance(record, dict) and record.get("hash") == expected_hash(entry) \
        and all(record.get(k) == v for k, v in found.items())


def content_ok(full, entry, size, progress=None):
    if "sha256" in entry:
        return hash_file(full, "sha256", progress=progress) == entry["sha256"]
    return hash_file(full, "sha1", git_blob_size=size, progress=progress) == entry["git_oid"]


def judge(root, manifest, verify, recorded=None, rehash=False, progress=None):
    """Judge every file of the manifest under root.

    Sizes always; with ``verify``, the content of every file that is not as ``recorded`` (the marker's
    per-file records) says it was when it last matched, and of every file with ``rehash``. ``progress`` is
    called with the bytes hashed so far. The result names the files that are missing, of the wrong size or
    of the wrong content, those that differ from their record (``changed``) and those read (``hashed``), and
    carries ``records`` for a new marker."""
    recorded = recorded if isinstance(recorded, dict) else {}
    states, records, changed, hashed = {}, {}, [], []
    done = [0]

    def tick(n):
        done[0] += n
        if progress:
            progress(done[0])

    for e in manifest:
        full = os.path.join(root, e["path"])
        try:
            found = stat_record(full)
        except FileNotFoundError:
            states[e["path"]] = "missing"
            continue
        if found["size"] != e["size"]:
            states[e["path"]] = "size"
            continue
        same = unchanged(recorded.get(e["path"]), found, e)
        if not same:
            changed.append(e["path"])
        if verify and (rehash or not same):
            hashed.append(e["path"])
            if not content_ok(full, e, found["size"], progress=tick):
                states[e["path"]] = "hash"
                continue
        states[e["path"]] = "ok"
        if verify or same:
            records[e["path"]] = dict(found, hash=expected_hash(e))
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
        "changed": sorted(changed),
        "hashed": sorted(hashed),
        "hashed_bytes": done[0],
        "records": records,
    }


def compare(root, manifest, verify):
    """Judge every file of the manifest under root; sizes only unless verify (then every file is read)."""
    judged = judge(root, manifest, verify, rehash=verify)
    for key in ("changed", "hashed", "hashed_bytes", "records"):
        judged.pop(key)
    return judged


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


def as_recorded(root, marker):
    """Whether every file of the marker's manifest is as the marker recorded it when its content last matched
    (size, modification and change times, inode, hash): complete without reading a file or asking the Hub. Returns
    that and the judgement (``judge``'s, sizes only)."""
    quick = judge(root, marker["manifest"], verify=False, recorded=marker.get("files"))
    return quick["complete"] and not quick["changed"], quick


def recorded_state(root):
    """What the marker in root records, judged as ``as_recorded`` does (no file is read, nothing is asked): None
    without a marker (no file, or not a JSON object); else its ``repo_id`` and ``revision``, and ``complete``."""
    marker = read_marker(root)
    if marker is None:
        return None
    out = {"repo_id": marker.get("repo_id"), "revision": marker.get("revision"), "complete": False}
    if isinstance(marker.get("manifest"), list):
        try:
            out["complete"] = as_recorded(root, marker)[0]
        except (KeyError, TypeError, ValueError, AttributeError, OSError):
            # a manifest this collection did not write: not complete (model_snapshot judges it against the Hub)
            pass
    return out


def marker_content(repo_id, revision, manifest, records=None):
    """The marker: the revision, its manifest, and per file what was found when its content matched."""
    return json.dumps({"repo_id": repo_id, "revision": revision, "manifest": manifest, "files": records or {}},
                      indent=1, sort_keys=True) + "\n"


def remove_for_repair(root, paths, now):
    """Remove the files of wrong content (and the client's record of each) so that a download fetches them again,
    and add them to the repairs file: {"repairs": [{"at", "files": {path: change time of the bad copy}}]}."""
    removed = {}
    for rel in sorted(paths):
        full = os.path.join(root, rel)
        try:
            removed[rel] = os.stat(full).st_ctime
            os.unlink(full)
        except FileNotFoundError:
            continue
        for suffix in (".metadata", ".lock"):
            try:
                os.unlink(os.path.join(root, CLIENT_METADATA, rel + suffix))
            except FileNotFoundError:
                pass
    if removed:
        log = os.path.join(root, REPAIRS)
        try:
            with open(log, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = {}
        repairs = data.get("repairs") if isinstance(data, dict) and isinstance(data.get("repairs"), list) else []
        repairs.append({"at": now, "files": removed})
        tmp = log + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"repairs": repairs}, fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, log)
    return sorted(removed)


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
    listed = {e["path"] for e in manifest} | {MARKER, REPAIRS}
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
