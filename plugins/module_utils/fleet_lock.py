# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""One fleet operation at a time: a lock file on the host where the fleet's routers live.

The lock is a JSON file created with O_EXCL (two runs cannot both create it); it names its holder - the control
node, the ansible-playbook process, the user, the playbook, a random token and when it was taken. Taking it over
(a holder that is gone) replaces it only where it still names the token the taker read, so that of two runs that
both found a stale lock one takes it. Pure functions on a path, no Ansible imports.
"""
from __future__ import annotations

import json
import os
import time


def read(path):
    """The holder the lock file names, or None where there is no lock (an unreadable one counts as held by nobody
    known: {"token": None})."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"token": None, "unreadable": True}


def _write_new(path, holder):
    """Create the lock file with O_EXCL; False where it exists."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(holder, fh, sort_keys=True)
    return True


def take(path, holder, takeover_token=None, now=None):
    """Take the lock for holder (a dict with a token). Returns (state, the lock's holder after it): state is
    "taken" (created), "held" (this holder had it: its time refreshed), "taken_over" (it named takeover_token and now
    names holder) or "busy" (another holder has it)."""
    holder = dict(holder, since=holder.get("since") or (now or time.time()))
    if _write_new(path, holder):
        return "taken", holder
    current = read(path)
    if current is None:  # released between the two reads
        return take(path, holder, takeover_token, now)
    if current.get("token") == holder.get("token"):
        return "held", current
    if takeover_token is not None and current.get("token") == takeover_token:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(holder, fh, sort_keys=True)
        os.chmod(tmp, 0o644)
        # the token was checked just before: a third run taking it over in between is the rare case where the later
        # rename wins; both then run, as before the lock existed (the message of each says whom it took over from)
        os.replace(tmp, path)
        return "taken_over", holder
    return "busy", current


def release(path, token):
    """Remove the lock where it names this token; True where it did."""
    current = read(path)
    if current is None or current.get("token") != token:
        return False
    os.unlink(path)
    return True


def describe(holder):
    """The holder in words, for a message."""
    if not holder:
        return "nobody"
    if holder.get("unreadable"):
        return "an unreadable lock file"
    since = holder.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since)) if isinstance(since, (int, float)) else "?"
    return (f"{holder.get('playbook', 'a playbook')} run by {holder.get('user', '?')} on {holder.get('controller', '?')}"
            f" (process {holder.get('pid', '?')}) since {when}")
