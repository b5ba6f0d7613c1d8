# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters of the unit deploy sequence (role unit_deploy)."""

from __future__ import annotations

import os


def _short(target):
    return os.path.basename(str(target).rstrip("/")) or "nothing"


def moved_links(now, recorded):
    """Reasons to restart: each link the service reads whose target moved since it was started.

    ``now`` maps each watched link to where it points now (empty: it is missing); ``recorded`` maps the links noted
    when the service was started to where they pointed then. A link the record does not name (a record written
    before the link was watched) is not a reason: what runs is taken to be what was recorded.
    """
    if not isinstance(now, dict) or not isinstance(recorded, dict):
        raise TypeError("moved_links expects two dictionaries (link -> target)")
    reasons = []
    for link in sorted(now):
        if link in recorded and str(recorded[link]) != str(now[link]):
            reasons.append(f"{link} moved ({_short(recorded[link])} to {_short(now[link])})")
    return reasons


def changed_stamps(now, recorded):
    """Reasons to restart: each repair file of what the service reads that changed since it was started.

    ``now`` maps each watched file to its checksum now (empty: it does not exist); ``recorded`` maps them to their
    checksums when the service was started (a file the record does not name had none then). A file that does not
    exist now is no reason.
    """
    if not isinstance(now, dict) or not isinstance(recorded, dict):
        raise TypeError("changed_stamps expects two dictionaries (file -> checksum)")
    return [f"{path} changed since it was started (a file it reads was repaired: it may have loaded the bad copy)"
            for path in sorted(now) if now[path] and str(recorded.get(path) or "") != str(now[path])]


class FilterModule:
    def filters(self):
        return {"moved_links": moved_links, "changed_stamps": changed_stamps}
