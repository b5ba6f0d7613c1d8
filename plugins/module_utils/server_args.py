# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The options an sglang tree's server accepts, read from its source without importing it.

sglang defines its server's command line in ``python/sglang/srt/server_args.py``
with ``parser.add_argument("--flag", "--alias", ...)`` calls. Importing that
module needs torch and the rest of the stack (and a GPU for some of it); parsing
it with ``ast`` needs nothing, so the check runs in preflight, before anything
changes, on any host that has the tree.
"""
from __future__ import annotations

import ast

SERVER_ARGS = "python/sglang/srt/server_args.py"


def option_strings(source):
    """Every option string (``--tp-size``, ``--tensor-parallel-size``, ...) given as a literal to an
    ``add_argument`` call in the source."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
                    found.add(arg.value)
    return sorted(found)


def flags_of(args):
    """The flags in a list of command-line words: each word that starts with ``-`` and is not a negative
    number, without an ``=value``."""
    flags = []
    for word in args:
        if not word.startswith("-") or word == "-":
            continue
        try:
            float(word)
            continue
        except ValueError:
            pass
        flags.append(word.split("=", 1)[0])
    return flags


def unknown_flags(args, options):
    """The flags of args that are not among options (exact names: sglang's parser accepts unambiguous prefixes,
    which a later option can make ambiguous)."""
    known = set(options)
    return [f for f in flags_of(args) if f not in known]
