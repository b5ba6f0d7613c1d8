"""The sglang_service role's server flags, written from the one table that declares them.

``FLAGS`` in plugins/module_utils/sglang_argv.py holds each flag the role gives from a variable of its own (name,
type, default, description, choices); the argv builder reads it there. This module writes the rest from it, between
the markers below:

- ``roles/sglang_service/meta/argument_specs.yml``: each flag's variable, as ansible-core validates it;
- ``roles/sglang_service/defaults/main.yml``: its default;
- ``roles/sglang_service/vars/main.yml``: its entry in the settings the role passes to the builder.

``python3 tools/role_docs.py`` runs it before it writes the README tables (which read the argument spec), so one
command brings everything in step; tests/unit/test_server_flags.py fails when a file is stale. Needs only Python 3
and PyYAML, as role_docs.py.
"""
from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
ROLE = Path("roles/sglang_service")
BEGIN = ("# BEGIN server flags (generated from FLAGS in plugins/module_utils/sglang_argv.py by "
         "`python3 tools/role_docs.py`; do not edit)")
END = "# END server flags"
# the types a flag may have: those the builder turns into one word (a bool is a switch)
TYPES = ("str", "int", "float", "bool", "path", "dict")


def flags(repo: Path = REPO):
    """FLAGS of the repository's sglang_argv.py (loaded by path: no Ansible needed)."""
    spec = importlib.util.spec_from_file_location("blackwell_sglang_argv", repo / "plugins/module_utils/sglang_argv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FLAGS


class _Dumper(yaml.SafeDumper):
    """Mappings in block style, but a value that is a list or mapping on one line (as the hand-written files do)."""


class _FlowList(list):
    pass


class _FlowDict(dict):
    pass


_Dumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_Dumper.add_representer(_FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))


def _flow(value):
    if isinstance(value, dict):
        return _FlowDict({k: _flow(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return _FlowList(_flow(v) for v in value)
    return value


def _dump(mapping: dict) -> str:
    """YAML of a mapping whose values' collections are on one line each (no sequence to indent for yamllint)."""
    return yaml.dump({k: _flow(v) if not isinstance(v, dict) else {kk: _flow(vv) for kk, vv in v.items()}
                      for k, v in mapping.items()},
                     Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=110).rstrip("\n")


def _indent(text: str, spaces: int) -> list[str]:
    return [(" " * spaces + line) if line else line for line in text.splitlines()]


def argument_spec_lines(table) -> list[str]:
    out = []
    for f in table:
        if f.type not in TYPES:
            raise ValueError(f"FLAGS: {f.name} has type {f.type!r}; a server flag is one of {', '.join(TYPES)}")
        spec = {"type": f.type, "description": f.description, "default": f.default}
        if f.choices:
            spec["choices"] = list(f.choices)
        out += _indent(_dump({f.variable: spec}), 6)
    return out


def defaults_lines(table) -> list[str]:
    out = []
    for f in table:
        plain = re.sub(r"\b[COVM]\(([^)]*)\)", r"\1", f.description)
        out += textwrap.wrap(plain, 118, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)
        out += _dump({f.variable: f.default}).splitlines()
    return out


def vars_lines(table) -> list[str]:
    return [f'  {f.name}: "{{{{ {f.variable} }}}}"' for f in table]


def _replace(text: str, lines: list[str], indent: int, path: Path) -> str:
    begin, end = " " * indent + BEGIN, " " * indent + END
    if text.count(begin + "\n") != 1 or text.count(end + "\n") != 1:
        raise ValueError(f"{path}: expected one line '{begin.strip()}' and one '{end.strip()}', at indent {indent}")
    head, rest = text.split(begin + "\n", 1)
    _, tail = rest.split(end + "\n", 1)
    return head + begin + "\n" + "".join(line + "\n" for line in lines) + end + "\n" + tail


# (file, indent of its markers, lines of the table)
FILES = ((ROLE / "meta/argument_specs.yml", 6, argument_spec_lines),
         (ROLE / "defaults/main.yml", 0, defaults_lines),
         (ROLE / "vars/main.yml", 2, vars_lines))


def expected(repo: Path = REPO) -> dict[Path, str]:
    """{path: text} of each file the table writes, as it must be."""
    table = flags(repo)
    names = [f.name for f in table]
    if len(names) != len(set(names)):
        raise ValueError(f"FLAGS names a flag twice: {sorted({n for n in names if names.count(n) > 1})}")
    return {repo / rel: _replace((repo / rel).read_text(), lines(table), indent, rel)
            for rel, indent, lines in FILES}


def stale(repo: Path = REPO) -> list[Path]:
    return [path for path, text in expected(repo).items() if path.read_text() != text]


def write(repo: Path = REPO) -> list[Path]:
    changed = stale(repo)
    for path, text in expected(repo).items():
        if path in changed:
            path.write_text(text)
    return changed
