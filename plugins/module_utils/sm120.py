# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Judge an sglang source tree for the SM120 shared-memory fix (sglang PR #14311).

Two judges. The compiler (``sm120_probe``, run by the release's own interpreter where Triton is)
compiles the tree's kernel for sm_120 as the tree's launcher configures it and reads the shared memory
the compiled kernel asks for: that is what decides whether the kernel launches. The estimate (here) is
pure Python and runs anywhere, before anything is built; it is only an estimate (it knows nothing of
stages or of how the compiler lays tiles out), so it is the fast refusal, not the last word.

The estimate: pure Python, no GPU, no import of sglang: the function
``_get_block_sizes_for_extend_attention`` is found by name wherever it lives,
and a small interpreter runs its body for a given compute capability (by
default 12.0) and head sizes, with platform probes answered as on a CUDA
machine. The tiles it chooses are measured against the shared memory of one
block: the Q, K and V tiles in 16-bit at one stage,
``2 * (BLOCK_M*D + BLOCK_N*D + BLOCK_N*DV)`` bytes with D = BLOCK_DMODEL +
BLOCK_DPE. A comment or a branch that names capability 12 but keeps Hopper's
sizes is not the fix: only what the function computes counts.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os

FUNCTION = "_get_block_sizes_for_extend_attention"
FIX_COMMIT = "632c7afa8ce20c2a696380ccf5b28337fd9903b7"
SMEM_LIMITS = {(12, 0): 101376, (12, 1): 101376, (9, 0): 232448, (10, 0): 232448, (8, 0): 166912}
DEFAULT_HEAD_SIZES = (128, 256)
DEFAULT_HEAD_DIMS = ((128, 128), (256, 256))


def parse_head_dim(value):
    """A head dim as (qk, v): 256 or "256" is (256, 256); "576/512" (MLA, absorbed) is (576, 512)."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        qk, v = value
    else:
        text = str(value).strip()
        qk, v = (text.split("/", 1) + [text])[:2]
    try:
        qk, v = int(qk), int(v)
    except (TypeError, ValueError):
        raise ValueError(f"a head dim is an integer or qk/v, like 256 or 576/512; got {value!r}") from None
    if qk <= 0 or v <= 0:
        raise ValueError(f"a head dim must be positive; got {value!r}")
    return (qk, v)


def head_dim_name(dim):
    return f"{dim[0]}/{dim[1]}"


def model_head_dims(config):
    """The attention head dims (qk, v) of a model, from its config.json as a dict.

    Multi-head latent attention (DeepSeek, GLM-5's GlmMoeDsa: kv_lora_rank set) runs extend attention at
    (qk_nope + qk_rope, v_head_dim) in the normal prefill path and at (kv_lora_rank + qk_rope,
    kv_lora_rank) absorbed: 256/256 and 576/512 for GLM-5. Other models: head_dim, or hidden_size /
    num_attention_heads. [] when the config names none of these.
    """
    if not isinstance(config, dict):
        return []
    text = config.get("text_config")
    if isinstance(text, dict) and not any(k in config for k in ("kv_lora_rank", "head_dim", "num_attention_heads")):
        config = text

    def num(key):
        v = config.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    dims = []
    if num("kv_lora_rank"):
        rope = num("qk_rope_head_dim") or 0
        nope, vdim = num("qk_nope_head_dim"), num("v_head_dim")
        if nope and vdim:
            dims.append((nope + rope, vdim))
        dims.append((num("kv_lora_rank") + rope, num("kv_lora_rank")))
    elif num("head_dim"):
        dims.append((num("head_dim"), num("v_head_dim") or num("head_dim")))
    elif num("hidden_size") and num("num_attention_heads"):
        d = num("hidden_size") // num("num_attention_heads")
        dims.append((d, d))
    return dims


def head_dims_for(head_sizes=DEFAULT_HEAD_SIZES, config=None):
    """The head dims to judge: those asked for, then the model's, each once, in order."""
    dims = []
    for d in [parse_head_dim(h) for h in head_sizes] + model_head_dims(config):
        if d not in dims:
            dims.append(d)
    return dims


class Unjudgeable(Exception):
    """The function does something the interpreter does not follow."""


def find_function(root):
    """Every (path, lineno, source) of a module under root that defines FUNCTION at top level."""
    hits = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in ("__pycache__", "node_modules"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            if FUNCTION not in text:
                continue
            try:
                tree = ast.parse(text, filename=path)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
                    hits.append((path, node.lineno, text))
    return hits


def _next_power_of_2(n):
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _probe(name, capability):
    """Answer platform probes and capability lookups as a CUDA machine of this capability would."""
    low = name.lower()
    if "capability" in low:
        return tuple(capability)
    if any(k in low for k in ("hip", "rocm", "npu", "xpu", "cpu", "musa", "mps", "gfx", "hpu")):
        return False
    if "cuda" in low:
        return True
    return None


class _Interp:
    def __init__(self, module_tree, capability):
        self.capability = tuple(capability)
        self.globals = {}
        # module-level simple assignments (CUDA_CAPABILITY = ..., _is_cuda = is_cuda(), ...)
        for node in module_tree.body:
            self._module_stmt(node)

    def _module_stmt(self, node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            probed = _probe(name, self.capability)
            if probed is not None:
                self.globals[name] = probed
                return
            try:
                self.globals[name] = self.expr(node.value, {})
            except Unjudgeable:
                pass
        elif isinstance(node, ast.If):
            # "if _is_cuda or _is_hip: CUDA_CAPABILITY = ..." and the like
            for sub in node.body + node.orelse:
                self._module_stmt(sub)

    # -- expressions
    def expr(self, node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.globals:
                return self.globals[node.id]
            probed = _probe(node.id, self.capability)
            if probed is not None:
                return probed
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            raise Unjudgeable(f"unknown name {node.id!r} at line {node.lineno}")
        if isinstance(node, ast.Tuple) or isinstance(node, ast.List):
            return tuple(self.expr(e, env) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            vals = node.values
            if isinstance(node.op, ast.And):
                result = True
                for v in vals:
                    result = self.expr(v, env)
                    if not result:
                        return result
                return result
            result = False
            for v in vals:
                result = self.expr(v, env)
                if result:
                    return result
            return result
        if isinstance(node, ast.UnaryOp):
            val = self.expr(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not val
            if isinstance(node.op, ast.USub):
                return -val
            raise Unjudgeable(f"unsupported unary operator at line {node.lineno}")
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left, env), self.expr(node.right, env)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b, ast.Div: lambda: a / b,
                   ast.Pow: lambda: a ** b}
            for op, fn in ops.items():
                if isinstance(node.op, op):
                    return fn()
            raise Unjudgeable(f"unsupported operator at line {node.lineno}")
        if isinstance(node, ast.Compare):
            left = self.expr(node.left, env)
            for op, comp in zip(node.ops, node.comparators):
                right = self.expr(comp, env)
                ok = {ast.Eq: lambda: left == right, ast.NotEq: lambda: left != right,
                      ast.Lt: lambda: left < right, ast.LtE: lambda: left <= right,
                      ast.Gt: lambda: left > right, ast.GtE: lambda: left >= right,
                      ast.In: lambda: left in right, ast.NotIn: lambda: left not in right}
                fn = next((f for o, f in ok.items() if isinstance(op, o)), None)
                if fn is None:
                    raise Unjudgeable(f"unsupported comparison at line {node.lineno}")
                if not fn():
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.expr(node.body if self.expr(node.test, env) else node.orelse, env)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value, env)
            index = self.expr(node.slice, env)
            try:
                return base[index]
            except (TypeError, IndexError, KeyError) as exc:
                raise Unjudgeable(f"cannot index at line {node.lineno}: {exc}") from None
        if isinstance(node, ast.Attribute):
            dotted = self._dotted(node)
            probed = _probe(dotted, self.capability)
            if probed is not None:
                return probed
            raise Unjudgeable(f"unknown attribute {dotted!r} at line {node.lineno}")
        if isinstance(node, ast.Call):
            fname = self._dotted(node.func)
            args = [self.expr(a, env) for a in node.args]
            short = fname.rsplit(".", 1)[-1]
            if short == "next_power_of_2" and len(args) == 1:
                return _next_power_of_2(args[0])
            if short in ("min", "max") and args:
                return (min if short == "min" else max)(*args)
            if short == "int" and len(args) == 1:
                return int(args[0])
            probed = _probe(fname, self.capability)
            if probed is not None:
                return probed
            raise Unjudgeable(f"unknown call {fname}() at line {node.lineno}")
        raise Unjudgeable(f"unsupported expression {type(node).__name__} at line {getattr(node, 'lineno', '?')}")

    def _dotted(self, node):
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return self._dotted(node.value) + "." + node.attr
        if isinstance(node, ast.Call):
            return self._dotted(node.func) + "()"
        raise Unjudgeable(f"unsupported callee at line {getattr(node, 'lineno', '?')}")

    # -- statements
    def run(self, body, env):
        """Run statements; return ('return', value) or None."""
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, ast.Assign):
                value = self.expr(stmt.value, env)
                for target in stmt.targets:
                    self._assign(target, value, env)
                continue
            if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                self._assign(stmt.target, self.expr(stmt.value, env), env)
                continue
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                cur = self.expr(stmt.target, env)
                fake = ast.BinOp(left=ast.Constant(cur), op=stmt.op, right=stmt.value)
                ast.copy_location(fake, stmt)
                env[stmt.target.id] = self.expr(fake, env)
                continue
            if isinstance(stmt, ast.If):
                branch = stmt.body if self.expr(stmt.test, env) else stmt.orelse
                out = self.run(branch, env)
                if out is not None:
                    return out
                continue
            if isinstance(stmt, ast.Return):
                return ("return", self.expr(stmt.value, env) if stmt.value is not None else None)
            raise Unjudgeable(f"unsupported statement {type(stmt).__name__} at line {stmt.lineno}")
        return None

    def _assign(self, target, value, env):
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise Unjudgeable(f"cannot unpack at line {target.lineno}")
            for t, v in zip(target.elts, value):
                self._assign(t, v, env)
        else:
            raise Unjudgeable(f"unsupported assignment target at line {target.lineno}")


def tiles_for(source, capability=(12, 0), lq=128, lv=128):
    """Run FUNCTION in source for one head size: the block sizes and the shared memory they need."""
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION)
    interp = _Interp(tree, capability)
    params = [a.arg for a in func.args.args]
    env = dict(zip(params, (lq, lv)))
    interp.run(func.body, env)
    missing = [k for k in ("BLOCK_M", "BLOCK_N", "BLOCK_DMODEL", "BLOCK_DV") if k not in env]
    if missing:
        raise Unjudgeable(f"{FUNCTION} did not set {', '.join(missing)}")
    d = env["BLOCK_DMODEL"] + env.get("BLOCK_DPE", 0)
    smem = 2 * (env["BLOCK_M"] * d + env["BLOCK_N"] * d + env["BLOCK_N"] * env["BLOCK_DV"])
    return {"head_size": lq, "head_dim": head_dim_name((lq, lv)), "BLOCK_M": env["BLOCK_M"], "BLOCK_N": env["BLOCK_N"],
            "BLOCK_DMODEL": env["BLOCK_DMODEL"], "BLOCK_DPE": env.get("BLOCK_DPE", 0),
            "BLOCK_DV": env["BLOCK_DV"], "num_warps": env.get("num_warps"), "num_stages": None,
            "smem_bytes": smem}


def limit_for(capability, smem_limit=None):
    limit = smem_limit or SMEM_LIMITS.get(tuple(capability))
    if limit is None:
        raise ValueError(f"no shared-memory limit known for capability {capability}; pass smem_limit")
    return limit


def _reason(tiles, limit, cap):
    over = [t for t in tiles if t["smem_bytes"] > limit]
    if over:
        return "; ".join(
            f"head dim {t['head_dim']}: (BLOCK_M, BLOCK_N) = ({t['BLOCK_M']}, {t['BLOCK_N']})"
            + (f", {t['num_warps']} warps, {t['num_stages']} stage(s)" if t.get("num_stages") else "")
            + f" needs {t['smem_bytes']} bytes of shared memory, over the {limit} of capability {cap}"
            for t in over)
    return "; ".join(f"head dim {t['head_dim']}: ({t['BLOCK_M']}, {t['BLOCK_N']}) needs {t['smem_bytes']} bytes, "
                     f"within {limit}" for t in tiles)


def judge_source(source, capability=(12, 0), head_sizes=DEFAULT_HEAD_SIZES, smem_limit=None):
    """The estimate for one module's FUNCTION: does every tile it picks fit the shared memory of `capability`?

    Head dims whose qk and v differ (MLA, absorbed: 576/512) are not judged by the estimate: the kernel
    splits such a head into two dots whose layout a tile count does not describe (the compiler judges them).
    """
    limit = limit_for(capability, smem_limit)
    cap = ".".join(map(str, capability))
    dims = [parse_head_dim(h) for h in head_sizes]
    judged = [d for d in dims if d[0] == d[1]]
    skipped = [head_dim_name(d) for d in dims if d[0] != d[1]]
    try:
        tiles = [tiles_for(source, capability, qk, v) for qk, v in judged]
    except Unjudgeable as exc:
        return {"present": False, "tiles": [], "smem_limit": limit, "judged": False, "not_judged": skipped,
                "reason": f"cannot judge {FUNCTION} for capability {cap}: {exc}"}
    for t in tiles:
        t["fits"] = t["smem_bytes"] <= limit
    reason = _reason(tiles, limit, cap)
    if skipped:
        reason += f"; head dim {', '.join(skipped)} not judged by the estimate"
    return {"present": all(t["fits"] for t in tiles), "tiles": tiles, "smem_limit": limit, "judged": True,
            "not_judged": skipped, "reason": reason}


def package_root(path):
    """The directory to search: python/sglang of a checkout, sglang/ of python/, or path itself."""
    if os.path.isdir(os.path.join(path, "python", "sglang")):
        return os.path.join(path, "python", "sglang")
    if os.path.isdir(os.path.join(path, "sglang")):
        return os.path.join(path, "sglang")
    return path


def judge_tree(path, capability=(12, 0), head_sizes=DEFAULT_HEAD_SIZES, smem_limit=None):
    """The estimate for an sglang checkout (or its python/ directory, or any directory above the package)."""
    root = package_root(path)
    if not os.path.isdir(root):
        return {"present": False, "judged": False, "file": None, "line": None, "tiles": [],
                "judge": "estimate", "reason": f"{path} is not a directory"}
    hits = find_function(root)
    if not hits:
        return {"present": False, "judged": False, "file": None, "line": None, "tiles": [],
                "judge": "estimate", "reason": f"{FUNCTION} is defined nowhere under {root}"}
    results = []
    for file, line, text in hits:
        verdict = judge_source(text, capability, head_sizes, smem_limit)
        verdict.update(file=file, line=line)
        results.append(verdict)
    return _combine(results, "estimate")


def _combine(results, judge):
    # every definition must be fixed: an old copy left behind would still be used by its importers
    bad = [r for r in results if not r["present"]]
    chosen = dict(bad[0] if bad else results[0])
    chosen["definitions"] = [{"file": r["file"], "line": r["line"], "present": r["present"]} for r in results]
    chosen["judge"] = judge
    return chosen


# -- the compiler judge: what the module does with the probe's answers

def file_sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def cache_key(files, triton, head_dims, capability, smem_limit, probe_source):
    """What a cached compiler verdict depends on: the kernel files' contents, Triton, the head dims asked,
    the capability and limit, and the probe itself."""
    parts = {
        "files": [[f, file_sha256(f)] for f in files],
        "triton": triton,
        "head_dims": [head_dim_name(d) for d in head_dims],
        "capability": list(capability),
        "smem_limit": smem_limit,
        "probe": hashlib.sha256(probe_source.encode("utf-8")).hexdigest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def compiled_verdict(answer, file, line, capability, smem_limit):
    """One definition's verdict from the probe's answer (a dict; see sm120_probe), or None when the compiler
    could not judge it (no usable Triton, a kernel file the probe cannot load or launch): the caller says why
    (judge_compiled) and never counts it as a pass."""
    limit = limit_for(capability, smem_limit)
    cap = ".".join(map(str, capability))
    status = answer.get("status")
    base = {"file": file, "line": line, "smem_limit": limit, "triton": answer.get("triton")}
    if status == "ok":
        tiles = [dict(t, fits=t["smem_bytes"] <= limit) for t in answer.get("tiles", [])]
        if not tiles:
            return None
        return dict(base, present=all(t["fits"] for t in tiles), judged=True, tiles=tiles,
                    reason=_reason(tiles, limit, cap) + f" (compiled by Triton {answer.get('triton')} for sm_"
                    f"{capability[0]}{capability[1]})")
    if status == "compile_error":
        # Triton could not compile the tree's kernel for this target: it cannot launch there either
        return dict(base, present=False, judged=True, tiles=[],
                    reason=f"Triton {answer.get('triton')} cannot compile the kernel for sm_{capability[0]}{capability[1]} "
                           f"at head dim {answer.get('head_dim')}: {answer.get('error')}")
    return None


def judge_compiled(answers, capability=(12, 0), smem_limit=None):
    """The tree's verdict from the probe's answers, one per definition as (file, line, answer).

    Returns (verdict, why_not): the verdict is None when any definition could not be judged by the
    compiler (why_not says why): the tree is then not judged, unless the caller accepts the estimate."""
    results = []
    for file, line, answer in answers:
        verdict = compiled_verdict(answer, file, line, capability, smem_limit)
        if verdict is None:
            status = answer.get("status")
            what = {"no_triton": "no usable Triton", "unloadable": "the probe could not call the launcher",
                    "failed": "the probe failed"}.get(status, f"the probe answered {status!r}")
            where = f" at head dim {answer['head_dim']}" if answer.get("head_dim") else ""
            return None, f"{file}: {what}{where}: {answer.get('error') or 'no tiles compiled'}"
        results.append(verdict)
    return _combine(results, "compiler"), None
