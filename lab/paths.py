"""Where the lab keeps things. Nothing here names a path of one machine."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAB_SRC = REPO / "lab"
FIXTURES = REPO / "tests" / "fixtures"


def state_dir() -> Path:
    """The lab's working state (engine data, image cache, venv, served trees).

    ``BLACKWELL_LAB_HOME`` moves it; by default it lives under the user's
    cache directory so that it is outside the repository (lint and git never
    see it) and survives between runs on one machine.
    """
    env = os.environ.get("BLACKWELL_LAB_HOME")
    if env:
        path = Path(env)
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(cache) / "blackwell-lab"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sub(name: str) -> Path:
    path = state_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path
