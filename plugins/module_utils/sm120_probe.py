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
    def __init__(self, capability, everything):
        self.capability = capability
        self.everything = everything  # True for the finder at the end of the path: whatever is not installed

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".", 1)[0]
        if top == "triton" or (not self.everything and top not in STUBBED):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return Stub(spec.name, self.capability)

    def exec_module(self, module):
        pass


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
    front, back = _StubFinder(capability, False), _StubFinder(capability, True)
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


def _arguments(launcher, lq, lv, dtype):
    """Shape-only arguments for the launcher's parameters, by their names."""
    import inspect

    tokens, heads, buffer = 256, 16, 1024
    kv_heads = 1 if lq != lv else heads  # MLA, absorbed: one latent head
    i32 = DType("int32")
    shapes = {"q_extend": (tokens, heads, lq), "k_extend": (tokens, kv_heads, lq), "v_extend": (tokens, kv_heads, lv),
              "o_extend": (tokens, heads, lv), "k_buffer": (buffer, kv_heads, lq), "v_buffer": (buffer, kv_heads, lv)}
    args = {}
    for name, param in inspect.signature(launcher).parameters.items():
        if name in shapes:
            args[name] = FakeTensor(shapes[name], dtype)
        elif name.endswith("indptr"):
            args[name] = FakeTensor((2,), i32)
        elif name.endswith("indices"):
            args[name] = FakeTensor((buffer,), i32)
        elif name == "custom_mask":
            args[name] = None
        elif name == "is_causal":
            args[name] = True
        elif name.startswith("max_len"):
            args[name] = tokens
        elif param.default is inspect.Parameter.empty:
            raise LookupError(f"{launcher.__name__} takes {name}, which the probe does not know how to give")
    return args


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
    except Exception as exc:
        return dict(out, status="unloadable", error=f"{type(exc).__name__}: {exc}")
    launches = []
    _catch_launches(launches)
    # the probe is a process of its own: the driver stays set until it exits
    driver.set_active(_Driver(GPUTarget("cuda", capability[0] * 10 + capability[1], 32)))
    for lq, lv in head_dims:
        del launches[:]
        try:
            args = _arguments(launcher, lq, lv, DType("bfloat16"))
        except LookupError as exc:
            return dict(out, status="unloadable", error=str(exc))
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
