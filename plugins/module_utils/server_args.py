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


def _literal_strings(node, names):
    """The strings of a list or tuple literal (``*NAME`` of another such list expanded), or None."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") \
            and len(node.args) == 1:
        return _literal_strings(node.args[0], names)
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    out = []
    for elt in node.elts:
        if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
            out.append(elt.value)
        elif isinstance(elt, ast.Starred):
            more = _literal_strings(elt.value, names)
            if more is None:
                return None
            out += more
        else:
            return None
    return out


def option_specs(source):
    """{option string: {"choices": [...] or None, "type": "int", "float" or None}} of every ``add_argument`` call
    with literal option strings. Choices are read where they are a literal list, or a module-level name bound to one
    (``choices=ATTENTION_BACKEND_CHOICES``); computed ones (a registry's keys) are None: not checked here. Lists a
    module extends at run time (``add_attention_backend_choices``) are read as the file writes them."""
    tree = ast.parse(source)
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = _literal_strings(node.value, names)
            if found is not None:
                names[node.targets[0].id] = found
    specs = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                 and a.value.startswith("-")]
        if not flags:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        choices = _literal_strings(kw["choices"], names) if "choices" in kw else None
        kind = kw.get("type")
        kind = kind.id if isinstance(kind, ast.Name) and kind.id in ("int", "float") else None
        for flag in flags:
            specs[flag] = {"choices": choices, "type": kind}
    return specs


def bad_values(args, specs):
    """[{"flag", "value", "why"}] for each option of the command-line words whose value the server would refuse: not
    one of its literal choices, or not a number where it takes one."""
    bad = []
    words = list(args)
    for i, word in enumerate(words):
        if not word.startswith("--") or word.split("=", 1)[0] not in specs:
            continue
        flag, _sep, inline = word.partition("=")
        value = inline if inline else (words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--")
                                       else None)
        if value is None:
            continue
        spec = specs[flag]
        if spec["choices"] is not None and value not in spec["choices"]:
            bad.append({"flag": flag, "value": value, "why": f"not one of {', '.join(spec['choices'])}"})
        elif spec["type"]:
            try:
                {"int": int, "float": float}[spec["type"]](value)
            except ValueError:
                bad.append({"flag": flag, "value": value, "why": f"not a number ({spec['type']})"})
    return bad
