"""Shared test set-up: the repository and its collection on sys.path."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
# `lab` is imported from the repository; the collection's plugins through .collections
for p in (REPO, REPO / ".collections"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
