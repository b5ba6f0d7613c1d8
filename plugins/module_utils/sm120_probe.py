# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The compiler judge of the SM120 fix: a probe run by the release's own interpreter, where Triton is.

The module ``sglang_sm120_check`` writes this file's source to a temporary file and runs it with the
``python`` of the release's environment. The probe

- loads the kernel file that defines ``_get_block_sizes_for_extend_attention`` on its own, under a
  private name: ``torch``, ``sglang`` and whatever else the file imports that is not Triton are stubs
  that answer as a CUDA machine of the target capability (12.0) would, so that neither sglang's package
  nor torch with CUDA is imported and no GPU is needed;
- calls the tree's own launcher (``extend_attention_fwd``) with shape-only tensors for each head dim, so
  that the tree's code chooses BLOCK_M, BLOCK_N, num_warps and num_stages; the kernel launches it makes
  are caught and compiled, not run;
- compiles each launched kernel with Triton for the target (``GPUTarget("cuda", 120, 32)``: sm_120)
  through Triton's own launch path (argument specialisation included), with a driver that answers only
  which target and device it is;
- prints, as JSON, the shared memory each compiled kernel asks for (``metadata.shared``).

It imports nothing of Ansible: it runs on its own, on Python 3.8 or later. Exit 0 with JSON on stdout in
every case it understands; ``status`` says what happened (``ok``, ``no_triton``, ``unloadable``,
``compile_error``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types

FUNCTION = "_get_block_sizes_for_extend_attention"
LAUNCHER = "extend_attention_fwd"
# modules the kernel file may import that must never be the real ones here: torch would look for a GPU,
# sglang's package imports half the world
STUBBED = ("torch", "sglang", "sgl_kernel", "flashinfer", "vllm", "aiter", "torch_npu", "intel_extension_for_pytorch")
_FALSY = ("hip", "rocm", "npu", "xpu", "cpu", "musa", "mps", "hpu", "gfx", "aiter")


def _answer(path, capability):
    """What a call of `path` returns on a CUDA machine of `capability` (None: not a platform probe)."""
    low = path.lower()
    last = low.rsplit(".", 1)[-1]
    if "capability" in last:
        return tuple(capability)
    if any(k in last for k in _FALSY):
        return False
    if "cuda" in last or last in ("is_available", "is_initialized"):
        return True
    return None


class Stub(types.ModuleType):
    """Anything the kernel file imports and does not need for compiling: attributes and calls are stubs."""

    def __init__(self, path, capability):
        super().__init__(path)
        self.__dict__["_path"] = path
        self.__dict__["_capability"] = capability
        self.__dict__["__path__"] = []  # a package: submodules import

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        path = self._path + "." + name
        if name in ("hip", "rocm") and self._path.endswith("version"):
            return None  # torch.version.hip
        return Stub(path, self._capability)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs and not isinstance(args[0], Stub):
            return args[0]  # used as a decorator
        answer = _answer(self._path, self._capability)
        return Stub(self._path + "()", self._capability) if answer is None else answer

    def __bool__(self):
        return _answer(self._path, self._capability) is not False

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())

    def __str__(self):
        return self._path

    __repr__ = __str__


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, capability, everything, siblings=None):
        self.capability = capability
        self.everything = everything  # True for the finder at the end of the path: whatever is not installed
        # the kernel file's own directory and the root its package is in: modules of sglang's package that are
        # files beside the kernel file (the kernels' helpers) are loaded from the tree, the rest are stubs
        self.siblings = siblings

    def _sibling(self, fullname):
        if not self.siblings or not fullname.startswith("sglang."):
            return None
        directory, root = self.siblings
        path = os.path.join(root, *fullname.split(".")) + ".py"
        return path if os.path.dirname(path) == directory and os.path.isfile(path) else None

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".", 1)[0]
        if top == "triton" or (not self.everything and top not in STUBBED):
            return None
        sibling = self._sibling(fullname)
        if sibling:
            return importlib.util.spec_from_file_location(fullname, sibling, loader=_SiblingLoader(self, sibling))
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return Stub(spec.name, self.capability)

    def exec_module(self, module):
        pass


class _SiblingLoader(importlib.abc.Loader):
    """A helper module beside the kernel file, run as it is; where it cannot run here, a stub stands in for it."""

    def __init__(self, finder, path):
        self.finder = finder
        self.path = path

    def create_module(self, spec):
        return None  # a plain module

    def exec_module(self, module):
        try:
            with open(self.path, encoding="utf-8") as fh:
                code = compile(fh.read(), self.path, "exec")
            exec(code, module.__dict__)  # noqa: S102  the tree's own helper, as the server would run it
        except Exception:  # what the import system takes from sys.modules after this is the stub
            sys.modules[module.__name__] = Stub(module.__name__, self.finder.capability)


class FakeTensor:
    """Shape, strides, dtype and an aligned address: all that Triton's launch path reads of a tensor."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype
        strides, acc = [], 1
        for size in reversed(self.shape):
            strides.append(acc)
            acc *= size
        self._strides = tuple(reversed(strides))

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def data_ptr(self):
        return 1 << 20

    def dim(self):
        return len(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    def element_size(self):
        return 2 if self.dtype.name in ("bfloat16", "float16") else 4

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def device(self):
        return "cuda:0"

    def is_contiguous(self):
        return True

    def contiguous(self):
        return self


class DType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name

    def __eq__(self, other):
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def load_kernel_file(path, capability):
    """The kernel file as a module of its own, with stubs for what it imports besides Triton."""
    import triton  # noqa: F401  the real one, before any stub is in place
    import triton.language  # noqa: F401

    saved = {k: v for k, v in sys.modules.items() if k.split(".", 1)[0] in STUBBED}
    for k in saved:
        del sys.modules[k]
    directory = os.path.dirname(os.path.abspath(path))
    root = directory
    while os.path.basename(root) and os.path.basename(root) != "sglang":
        root = os.path.dirname(root)
    siblings = (directory, os.path.dirname(root)) if os.path.basename(root) == "sglang" else None
    front, back = _StubFinder(capability, False, siblings), _StubFinder(capability, True)
    sys.meta_path.insert(0, front)
    sys.meta_path.append(back)
    name = "blackwell_sm120_probe_kernel"
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # triton.jit reads the function's module
        spec.loader.exec_module(module)
    finally:
        sys.meta_path.remove(front)
        sys.meta_path.remove(back)
        for k in [k for k in sys.modules if k.split(".", 1)[0] in STUBBED]:
            del sys.modules[k]
        sys.modules.update(saved)
    return module


class _Driver:
    """Triton's active driver, answering only what compiling for a target needs."""

    def __init__(self, target):
        self.target = target

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return "cuda:0"


class CompileFailed(Exception):
    """Triton could not compile a launched kernel for the target (not a failure of the probe's stand-ins)."""


def _catch_launches(launches):
    """Every `kernel[grid](...)` from now on compiles the kernel for the target instead of running it."""
    from triton.runtime.jit import JITFunction

    def getitem(kernel, grid):
        def launch(*args, **kwargs):
            try:
                compiled = kernel.run(*args, grid=grid, warmup=True, **kwargs)
            except Exception as exc:
                raise CompileFailed(f"{kernel.fn.__name__}: {type(exc).__name__}: {str(exc)[-2000:]}") from exc
            launches.append({
                "kernel": kernel.fn.__name__,
                "shared": int(compiled.metadata.shared),
                "num_warps": int(compiled.metadata.num_warps),
                "num_stages": int(compiled.metadata.num_stages),
                "constants": {k: v for k, v in kwargs.items()
                              if k in ("BLOCK_M", "BLOCK_N", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV")},
            })
        return launch

    JITFunction.__getitem__ = getitem


# -- what the launcher's parameters are, read from the launcher and the kernels it launches
#
# No parameter is known by its name. A parameter with a default keeps it (flags at their defaults, optionals
# None). For the others the launcher's own code says what they are: its annotation; a comparison with None (the
# launcher handles None: it is optional); attributes a tensor has (shape, stride, dtype, ...), read by the
# launcher, or a kernel parameter the launched kernel loads through (a pointer); arithmetic (a number); a truth
# test (a flag, given as True: the code it guards is compiled too). A pointer whose loaded values address other
# loads is an index (int32, one dimension); any other is data: [tokens, heads, head dim] in the judged dtype,
# where the head dim is the one the launcher hands the block-size function for it (qk, or v for the tensor whose
# last dimension becomes the function's second argument).

TENSOR_ATTRS = frozenset(("shape", "stride", "dtype", "ndim", "dim", "size", "device", "to", "view", "reshape",
                          "contiguous", "numel", "data_ptr", "is_contiguous", "element_size", "transpose",
                          "permute", "unsqueeze", "squeeze", "flatten", "new_empty", "new_zeros", "is_cuda"))
MEMORY_OPS = frozenset(("load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg",
                        "atomic_and", "atomic_or", "atomic_xor", "make_block_ptr", "make_tensor_descriptor"))
TOKENS, HEADS = 256, 16


def _function_ast(fn):
    """The FunctionDef of a Python function, from its source file (None where there is no source)."""
    import ast
    import inspect
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            return node
    return None


def _names(node):
    import ast

    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _jit_of(obj):
    """The JITFunction behind a kernel object (an autotuner or heuristics wrapper holds it as .fn), or None."""
    for _depth in range(4):
        if type(obj).__name__ == "JITFunction":
            return obj
        obj = getattr(obj, "fn", None)
    return None


def _additive_names(expr):
    """The names that stand as terms of a sum (a pointer plus offsets): `P + a * s + b[None, :]` gives P and b."""
    import ast

    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _additive_names(expr.left) | _additive_names(expr.right)
    if isinstance(expr, ast.Subscript):
        return _additive_names(expr.value)
    if isinstance(expr, ast.Name):
        return {expr.id}
    return set()


def _assignments(node):
    """(target names, value) of every assignment in a function, loops' targets from what they iterate."""
    import ast

    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign):
            yield {t for target in sub.targets for t in _names(target)}, sub.value
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and sub.value is not None:
            yield _names(sub.target), sub.value
        elif isinstance(sub, ast.For):
            yield _names(sub.target), sub.iter


def _closure(node, seeds, reads):
    """The names computed from the seeds through the function's assignments; reads(value) is what counts as read."""
    found = set(seeds)
    changed = True
    while changed and found:
        changed = False
        for targets, value in _assignments(node):
            if reads(value) & found and not targets <= found:
                found |= targets
                changed = True
    return found


def _memory_calls(node):
    """(call, address expression) of every load, store, atomic and block pointer in a function."""
    import ast

    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in MEMORY_OPS:
            address = sub.args[0] if sub.args else next(
                (k.value for k in sub.keywords if k.arg in ("pointer", "base")), None)
            if address is not None:
                yield sub, address


class KernelUse:
    """How a Triton kernel (and the Triton functions it calls) uses each of its parameters.

    A pointer is a parameter that stands as a term of a sum that a load, store or atomic addresses (or of a sum
    assigned to a name that does). Its values are loaded where such a sum is loaded; a pointer whose values reach
    an address (through any computation, or a Triton function called with them) is an index, any other holds
    data. A constexpr is never a pointer: it is a flag where the kernel tests it for truth."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.constexpr = {p.name for p in kernel.params if p.is_constexpr}
        self._memo = {}

    def kind(self, name):
        """'index', 'data', 'flag' or 'scalar'."""
        if name in self.constexpr:
            return "flag" if self._tested(self.kernel.fn, name) else "scalar"
        return self._pointer(self.kernel.fn, name, 0) or "scalar"

    def _pointer(self, fn, name, depth):
        """'index' or 'data' where NAME is a pointer in FN (or in a Triton function FN passes it to), else None."""
        key = (fn, name)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # recursion guard
        node = _function_ast(fn)
        result = None
        if node is not None and depth < 6:
            pointers = _closure(node, {name}, _additive_names)
            addressed = any(_additive_names(address) & pointers for _call, address in _memory_calls(node))
            if addressed:
                loaded = self._loaded_through(node, pointers)
                result = "index" if self._reach_address(fn, node, _closure(node, loaded, _names), depth) else "data"
            else:
                for callee, param in self._passed_on(fn, node, {name}, _additive_names):
                    result = self._pointer(callee.fn, param, depth + 1)
                    if result:
                        break
        self._memo[key] = result
        return result

    @staticmethod
    def _loaded_through(node, pointers):
        import ast

        loaded = set()
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and sub.value is not None:
                for call, address in _memory_calls(sub.value):
                    if call.func.attr == "load" and _additive_names(address) & pointers:
                        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                        loaded |= {t for target in targets for t in _names(target)}
        return loaded

    def _reach_address(self, fn, node, values, depth):
        """Whether any of the values is part of an address, here or in a Triton function called with it."""
        if not values:
            return False
        if any(_names(address) & values for _call, address in _memory_calls(node)):
            return True
        for callee, param in self._passed_on(fn, node, values, _names):
            inner = _function_ast(callee.fn)
            if inner is not None and depth < 6 and \
                    self._reach_address(callee.fn, inner, _closure(inner, {param}, _names), depth + 1):
                return True
        return False

    @staticmethod
    def _passed_on(fn, node, names, reads):
        """(Triton function, its parameter) for each call in FN that passes one of the names."""
        import ast

        for sub in ast.walk(node):
            if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)):
                continue
            callee = _jit_of(getattr(fn, "__globals__", {}).get(sub.func.id))
            if callee is None:
                continue
            params = list(callee.arg_names)
            for param, value in list(zip(params, sub.args)) + [(k.arg, k.value) for k in sub.keywords]:
                if param in params and reads(value) & names:
                    yield callee, param

    @staticmethod
    def _tested(fn, name):
        import ast

        node = _function_ast(fn)
        if node is None:
            return False
        for sub in ast.walk(node):
            if isinstance(sub, (ast.If, ast.IfExp, ast.While)) and name in _names(sub.test):
                return True
            if isinstance(sub, ast.BoolOp) and any(isinstance(v, ast.Name) and v.id == name for v in sub.values):
                return True
        return False


class LauncherUse:
    """What the launcher does with each of its parameters."""

    def __init__(self, launcher, module):
        import ast
        import inspect

        self.launcher = launcher
        self.name = launcher.__name__
        self.signature = inspect.signature(launcher)
        self.node = _function_ast(launcher)
        if self.node is None:
            raise LookupError(f"{self.name} has no source to read its parameters from")
        self.module = module
        self.aliases = self._aliases()
        self.uses = {name: set() for name in self.signature.parameters}
        self.kernel_params = {name: [] for name in self.signature.parameters}
        self.head_dim_role = {}  # parameter -> 0 (qk) or 1 (v): its last dimension feeds the block-size function
        for sub in ast.walk(self.node):
            self._note(sub)

    def _aliases(self):
        """Local names the launcher assigns from one expression each (for the block-size function's arguments)."""
        import ast

        out = {}
        for sub in ast.walk(self.node):
            if not isinstance(sub, ast.Assign) or len(sub.targets) != 1:
                continue
            target, value = sub.targets[0], sub.value
            if isinstance(target, ast.Name):
                out[target.id] = value
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                    len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name):
                        out[t.id] = v
        return out

    def _param(self, node):
        import ast

        return node.id if isinstance(node, ast.Name) and node.id in self.uses else None

    def _note(self, sub):
        import ast

        if isinstance(sub, ast.Attribute) and self._param(sub.value):
            self.uses[sub.value.id].add("attr:" + sub.attr)
        elif isinstance(sub, ast.Subscript) and self._param(sub.value):
            self.uses[sub.value.id].add("subscript")
        elif isinstance(sub, ast.Compare):
            operands = [sub.left] + list(sub.comparators)
            if any(isinstance(o, ast.Constant) and o.value is None for o in operands):
                for o in operands:
                    if self._param(o):
                        self.uses[o.id].add("none")
            for o in operands:
                if self._param(o):
                    self.uses[o.id].add("number")
        elif isinstance(sub, ast.BinOp):
            for o in (sub.left, sub.right):
                if self._param(o):
                    self.uses[o.id].add("number")
        elif isinstance(sub, (ast.If, ast.IfExp, ast.While)) and self._param(sub.test):
            self.uses[sub.test.id].add("flag")
        elif isinstance(sub, ast.BoolOp):
            for v in sub.values:
                if self._param(v):
                    self.uses[v.id].add("flag")
        elif isinstance(sub, ast.UnaryOp) and isinstance(sub.op, ast.Not) and self._param(sub.operand):
            self.uses[sub.operand.id].add("flag")
        elif isinstance(sub, ast.Call):
            self._note_call(sub)

    def _note_call(self, call):
        import ast

        func = call.func
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):  # kernel[grid](...)
            kernel = _jit_of(getattr(self.module, func.value.id, None))
            if kernel is None:
                return
            names = list(kernel.arg_names)
            passed = list(zip(names, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg in names]
            for kname, value in passed:
                for n in _names(value):
                    if n in self.kernel_params:
                        self.kernel_params[n].append((kernel, kname))
            return
        if isinstance(func, ast.Name) and func.id == FUNCTION:
            for role, arg in enumerate(call.args[:2]):
                expr = self.aliases.get(arg.id, arg) if isinstance(arg, ast.Name) else arg
                # X.shape[-1] (or X.shape[k], X.size(-1)): the parameter X carries this head dim
                if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and \
                        expr.value.attr == "shape" and self._param(expr.value.value):
                    self.head_dim_role.setdefault(expr.value.value.id, role)
            return
        for arg in list(call.args) + [k.value for k in call.keywords]:
            if self._param(arg):
                self.uses[arg.id].add("passed")
        if isinstance(func, ast.Attribute) and func.attr in ("cdiv", "next_power_of_2") or \
                isinstance(func, ast.Name) and func.id in ("range", "min", "max", "int", "float"):
            for arg in call.args:
                if self._param(arg):
                    self.uses[arg.id].add("number")

    def arguments(self, lq, lv, dtype):
        """A value for every parameter the launcher requires; LookupError naming a parameter nothing describes."""
        import inspect

        kinds = {}
        args = {}
        for name, param in self.signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.default is not inspect.Parameter.empty:
                continue
            args[name] = self._value(name, param, lq, lv, dtype, kinds)
        return args

    def _value(self, name, param, lq, lv, dtype, kinds):
        import inspect

        annotation = param.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
        text = str(text)
        if annotation is not inspect.Parameter.empty:
            if "Optional" in text or "None" in text:
                return None
            if text in ("int",):
                return TOKENS
            if text in ("float",):
                return 1.0
            if text in ("bool",):
                return True
        uses = self.uses[name]
        if "none" in uses:
            return None
        kernel_kinds = set()
        for kernel, kname in self.kernel_params[name]:
            key = id(kernel)
            if key not in kinds:
                kinds[key] = KernelUse(kernel)
            kernel_kinds.add(kinds[key].kind(kname))
        tensor = any(u.startswith("attr:") and u[5:] in TENSOR_ATTRS for u in uses) or "subscript" in uses or \
            kernel_kinds & {"index", "data"} or "Tensor" in text
        if tensor:
            if "index" in kernel_kinds:
                return FakeTensor((2,), DType("int32"))
            dim = lv if self.head_dim_role.get(name) == 1 else lq
            return FakeTensor((TOKENS, HEADS, dim), dtype)
        if "flag" in kernel_kinds or "flag" in uses:
            return True
        if "number" in uses:
            return TOKENS
        if "scalar" in kernel_kinds:
            return 1.0
        raise LookupError(
            f"{self.name} requires {name}, and nothing in {self.name} or the kernels it launches says what it is "
            f"(no annotation, default or comparison with None; not read as a tensor, computed with, tested, or "
            f"passed to a kernel)")


def judge(path, capability, head_dims):
    """Compile the launcher's kernels for each head dim (qk, v); a dict for JSON."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.runtime.driver import driver
    except Exception as exc:  # any failure to import is "no usable Triton"
        return {"status": "no_triton", "error": f"{type(exc).__name__}: {exc}"}
    out = {"status": "ok", "triton": triton.__version__, "file": path, "tiles": []}
    try:
        module = load_kernel_file(path, capability)
        launcher = getattr(module, LAUNCHER, None)
        if not callable(launcher) or not callable(getattr(module, FUNCTION, None)):
            raise LookupError(f"{path} defines no {LAUNCHER} and {FUNCTION} to call")
        kernels = [n for n, v in vars(module).items() if type(v).__name__ == "JITFunction"]
        if not kernels:
            raise LookupError(f"{path} defines no Triton kernel")
        uses = LauncherUse(launcher, module)
    except Exception as exc:
        return dict(out, status="unloadable", error=f"{type(exc).__name__}: {exc}")
    launches = []
    _catch_launches(launches)
    # the probe is a process of its own: the driver stays set until it exits
    driver.set_active(_Driver(GPUTarget("cuda", capability[0] * 10 + capability[1], 32)))
    for lq, lv in head_dims:
        del launches[:]
        try:
            args = uses.arguments(lq, lv, DType("bfloat16"))
        except LookupError as exc:
            return dict(out, status="unloadable", head_dim=f"{lq}/{lv}", error=str(exc))
        try:
            launcher(**args)
        except CompileFailed as exc:
            return dict(out, status="compile_error", head_dim=f"{lq}/{lv}", error=str(exc))
        except Exception as exc:  # the launcher wants something the stand-ins do not give: not the compiler's answer
            return dict(out, status="unloadable", head_dim=f"{lq}/{lv}",
                        error=f"{LAUNCHER} failed before compiling: {type(exc).__name__}: {str(exc)[-1000:]}")
        if not launches:
            return dict(out, status="unloadable", error=f"{LAUNCHER} launched no kernel for head dim {lq}/{lv}")
        for launch in launches:
            c = launch["constants"]
            out["tiles"].append({"head_dim": f"{lq}/{lv}", "head_size": lq, "kernel": launch["kernel"],
                                 "BLOCK_M": c.get("BLOCK_M"), "BLOCK_N": c.get("BLOCK_N"),
                                 "BLOCK_DMODEL": c.get("BLOCK_DMODEL"), "BLOCK_DPE": c.get("BLOCK_DPE", 0),
                                 "BLOCK_DV": c.get("BLOCK_DV"), "num_warps": launch["num_warps"],
                                 "num_stages": launch["num_stages"], "smem_bytes": launch["shared"]})
    return out


def triton_version():
    try:
        from importlib.metadata import version
        return version("triton")
    except Exception:
        return None


def main(argv):
    if argv[1:2] == ["--triton-version"]:
        sys.stdout.write(json.dumps({"triton": triton_version()}) + "\n")
        return 0
    request = json.loads(argv[1])
    capability = tuple(request["capability"])
    head_dims = [tuple(h) for h in request["head_dims"]]
    sys.stdout.write(json.dumps(judge(request["file"], capability, head_dims)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
