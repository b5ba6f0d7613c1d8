# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""What verify reads of a release, its service and its server, shaped as its judge (module_utils/verify.py) reads it.

Pure functions: the module (plugins/modules/sglang_probe.py) does the reading.
"""

from __future__ import annotations

import json

# Every distribution of a Python environment, by its normalised name: run by the release's own interpreter.
PACKAGES_SCRIPT = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))"
)


def parse_packages(rc, out):
    """The {name: version} the script printed, or {} when it did not run (no interpreter, an error)."""
    if rc != 0:
        return {}
    try:
        found = json.loads(out)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def chat_found(status, body):
    """{status, content, finish_reason} of an OpenAI-style chat completion's answer (status -1: no answer)."""
    content = finish = None
    try:
        choice = json.loads(body or b"")["choices"][0]
        content = choice.get("message", {}).get("content")
        finish = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        pass
    return {"status": status, "content": content, "finish_reason": finish}


def parse_active_state(out):
    """systemctl show --property=ActiveState's answer: the state, or None when it said nothing."""
    for line in out.splitlines():
        if line.startswith("ActiveState="):
            return line.split("=", 1)[1] or None
    return None
