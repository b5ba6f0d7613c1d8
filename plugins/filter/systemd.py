# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters for systemd unit files."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./$-]+$")


def systemd_quote(value):
    text = str(value)
    text = text.replace("%", "%%").replace("$", "$$")
    if text and _PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class FilterModule:
    def filters(self):
        return {"systemd_quote": systemd_quote}
