# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""A local copy of a model repository judged against its revision's manifest as the Hub lists it, writing nothing.

What model_snapshot does with state=checked, and sglang_probe with its model option (verify's host read: one round
trip for the model and the rest). The judging is module_utils/snapshot.py's; this adds the Hub's listing.
"""

from __future__ import annotations

import json
import re

from ansible.module_utils.urls import open_url

from ansible_collections.blackwell.serving.plugins.module_utils import snapshot
from ansible_collections.blackwell.serving.plugins.module_utils.http_session import retrying, secret_problem, times

NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
REVISION = re.compile(r"^[0-9a-f]{40}$")

# the options a check reads, as model_snapshot names them (sglang_probe's model option takes these)
SPEC = dict(
    path=dict(type="path", required=True),
    repo_id=dict(type="str", required=True),
    revision=dict(type="str", required=True),
    endpoint=dict(type="str", default="https://huggingface.co"),
    token=dict(type="str", no_log=True),
    timeout=dict(type="int", default=60),
)


class ListingError(Exception):
    """The revision's manifest could not be read; the message says which request, and why (listing_error)."""


def input_problem(p):
    """What is wrong with the options before anything is read (the token's value never shown), or None."""
    if secret_problem(p["token"], "token"):
        return secret_problem(p["token"], "token")
    if not REVISION.match(p["revision"]):
        return f"revision must be a full 40-hex commit id; got {p['revision']!r}"
    return None


def fetch_manifest(p, agent):
    """The revision's manifest, every page of the Hub's tree listing (raises urllib's errors, snapshot.ManifestError).
    A page the Hub answers with a 5xx or 429 (its rate limit), or does not answer, is asked again
    (http_session.retrying), as huggingface_hub does."""
    url = f"{p['endpoint'].rstrip('/')}/api/models/{p['repo_id']}/tree/{p['revision']}?recursive=true"
    headers = {"Authorization": f"Bearer {p['token']}"} if p["token"] else {}
    entries = []
    while url:
        resp = retrying(lambda page=url: open_url(page, headers=headers, timeout=p["timeout"], http_agent=agent))
        entries.extend(json.loads(resp.read()))
        link = NEXT.search(resp.headers.get("Link") or "")
        url = link.group(1) if link else None
    return snapshot.normalise_manifest(entries)


def listing_error(p, exc):
    """The message for a manifest that could not be read: which request, and what a 401/403 needs."""
    if isinstance(exc, snapshot.ManifestError):
        return f"{p['repo_id']}@{p['revision']} from {p['endpoint']}: {exc}"
    detail = getattr(exc, "code", None)
    hint = " (a token with access to the repository is needed: set model_weights_token)" if detail in (401, 403) else ""
    asked = f" (asked {times(exc.asked)})" if getattr(exc, "asked", 1) > 1 else ""
    return f"could not list {p['repo_id']} at revision {p['revision']} from {p['endpoint']}: {exc}{asked}{hint}"


def public(judged):
    """A judgement as the modules return it (the records go into the marker only)."""
    out = {k: v for k, v in judged.items() if k not in ("records", "changed")}
    out["changed_files"] = judged["changed"]
    return out


def check(p, agent, rehash=False, progress=None):
    """The copy at p['path'] against the manifest: every file there, of its size, of its content where it differs
    from the marker's record of it (every file with rehash), and whether the marker records this very manifest.
    progress: None, or a callable that takes the bytes to hash and returns the judge's progress callback (with a
    close method). Raises ListingError where the manifest cannot be read; an error reading the copy is not one."""
    root = p["path"]
    marker = snapshot.read_marker(root)
    matches = snapshot.marker_matches(marker, p["repo_id"], p["revision"])
    try:
        manifest = fetch_manifest(p, agent)
    except Exception as exc:  # urllib's errors, a proxy's, a bad JSON body: say which request failed
        raise ListingError(listing_error(p, exc)) from exc
    shown = progress(sum(e["size"] for e in manifest)) if progress else None
    try:
        judged = snapshot.judge(root, manifest, verify=True, recorded=marker.get("files") if matches else None,
                                rehash=rehash, progress=shown)
    finally:
        if shown:
            shown.close()
    out = dict(public(judged), source="hub", extra=snapshot.extra_files(root, manifest))
    out["marker_matches_manifest"] = matches and marker["manifest"] == manifest
    out["complete"] = judged["complete"] and out["marker_matches_manifest"]
    return out
