"""Parse a command line with sglang's own argument parser, from a real sglang tree, without sglang's heavy imports.

Run as a script in a fresh interpreter (its import stubs must not leak into the test process):

    python real_sglang_parser.py TREE ARG...

TREE is sglang's python/ directory (the sdist's root). Prints JSON: ``parsed``, the options as the parser
read them, and ``options``, every option string it defines; or exits 2 with argparse's own message when the
parser refuses the line.

What is real: ``sglang/srt/server_args.py`` (``ServerArgs.add_cli_args`` and the ``--config`` merge of
``prepare_server_args``), ``server_args_config_parser.py`` and ``environ.py``, executed as they are. What is
not: the modules server_args.py imports for torch, transformers, the LoRA registry and the tool-call and
reasoning parsers. Each is replaced by a module that lifts, on first use, the one top-level definition asked
for out of the real module's source (a function, a constant, or a class's dictionary of names such as
``FunctionCallParser.ToolCallParserEnum``, whose keys are the parser's choices), so the choices and value
types the parser uses are the tree's own; anything else becomes an inert function returning None.
"""
import argparse
import ast
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types

LIFTED = [
    "sglang.utils",
    "sglang.srt.connector",
    "sglang.srt.function_call.function_call_parser",
    "sglang.srt.layers.attention.fla.chunk_delta_h",
    "sglang.srt.lora.lora_registry",
    "sglang.srt.parser.reasoning_parser",
    "sglang.srt.utils.common",
    "sglang.srt.utils.hf_transformers_utils",
]
PACKAGES = ["sglang", "sglang.srt"]


def _inert(*_a, **_k):
    return None


class Lifted(types.ModuleType):
    """A module whose attributes are lifted one by one out of the real module's source."""

    def __init__(self, name, path):
        super().__init__(name)
        self.__file__ = path
        with open(path, encoding="utf-8") as fh:
            self._tree = ast.parse(fh.read(), filename=path)
        self._ns = {"__name__": name, "json": json, "os": os, "argparse": argparse}
        exec("from typing import *\nimport re, enum, dataclasses, logging", self._ns)  # noqa: S102

    def _lift(self, name):
        for node in self._tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                node.decorator_list = []
                node.returns = None
                for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                            node.args.vararg, node.args.kwarg]:
                    if arg is not None:
                        arg.annotation = None  # annotations name types of heavy modules
                exec(compile(ast.Module([node], []), self.__file__, "exec"), self._ns)  # noqa: S102
                return self._ns[name]
            if isinstance(node, ast.ClassDef) and node.name == name:
                attrs = {}
                for item in node.body:
                    target = item.target if isinstance(item, ast.AnnAssign) else (
                        item.targets[0] if isinstance(item, ast.Assign) else None)
                    if isinstance(target, ast.Name) and isinstance(item.value, ast.Dict):
                        # the names a class registers (the values are classes of heavy modules)
                        attrs[target.id] = {ast.literal_eval(k): None for k in item.value.keys}
                return type(name, (), attrs)
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                    try:
                        return eval(compile(ast.Expression(node.value), self.__file__, "eval"), self._ns)  # noqa: S307
                    except Exception:  # noqa: BLE001 - a value built from heavy imports
                        return _inert
        return _inert

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = self._lift(name)
        setattr(self, name, value)
        return value


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, tree):
        self.tree = tree

    def _path(self, fullname):
        base = os.path.join(self.tree, *fullname.split("."))
        return base + ".py" if os.path.isfile(base + ".py") else os.path.join(base, "__init__.py")

    def find_spec(self, fullname, path=None, target=None):
        if fullname in PACKAGES or fullname in LIFTED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname in PACKAGES)
        return None

    def create_module(self, spec):
        if spec.name in PACKAGES:
            mod = types.ModuleType(spec.name)
            mod.__path__ = [os.path.join(self.tree, *spec.name.split("."))]
            return mod
        return Lifted(spec.name, self._path(spec.name))

    def exec_module(self, module):
        pass


class IntermediatePackages(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Packages on the way to a lifted module (sglang.srt.layers, ...) without running their __init__."""

    def __init__(self, tree):
        self.tree = tree

    def find_spec(self, fullname, path=None, target=None):
        if any(lifted.startswith(fullname + ".") for lifted in LIFTED) and fullname not in PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = [os.path.join(self.tree, *spec.name.split("."))]
        return mod

    def exec_module(self, module):
        pass


def parse(tree, argv):
    tree = os.path.abspath(tree)
    sys.meta_path[:0] = [Finder(tree), IntermediatePackages(tree)]
    from sglang.srt import server_args as real  # noqa: PLC0415 - after the finders

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    real.ServerArgs.add_cli_args(parser)
    if "--config" in argv:
        # as prepare_server_args does
        from sglang.srt.server_args_config_parser import ConfigArgumentMerger  # noqa: PLC0415
        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    options = sorted(o for action in parser._actions for o in action.option_strings)  # noqa: SLF001
    return {"options": options, "parsed": vars(parser.parse_args(argv))}


if __name__ == "__main__":
    print(json.dumps(parse(sys.argv[1], sys.argv[2:]), default=repr))
