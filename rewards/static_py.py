"""`ast` analysis of a candidate: its extensions, and what `ModelNew.forward` computes how.

Resolves imports (``import torch.nn.functional as F``), extension handles
(``ext = load_inline(...)``, ``self.ext = load_inline(...)``, ``fn = ext.fn``, functions that
return ``load_inline(...)``) and walks ``forward`` plus the methods/functions it calls,
sorting every call into torch compute (heavy or light), extension calls, or incidental.
The walk itself (submodules, containers, ``.apply``, helpers) is `rewards.callgraph`.

>>> src = '''
... import torch, torch.nn as nn
... from torch.utils.cpp_extension import load_inline
... ext = load_inline(name="e", cpp_sources="", cuda_sources=CU, functions=["gelu"])
... class ModelNew(nn.Module):
...     def __init__(self, d):
...         super().__init__()
...         self.fc = nn.Linear(d, d)
...     def forward(self, x):
...         return ext.gelu(self.fc(x).view(-1))
... '''
>>> r = extract(src)
>>> [(o.name, o.kind, o.family) for o in r.ops]
[('gelu', 'ext', None), ('Linear', 'torch_heavy', 'gemm')]
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from . import callgraph


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # torch_heavy | torch_light | ext
    family: str | None
    line: int


@dataclass
class PyReport:
    tree: ast.Module | None = None
    lines: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    ext_names: set[str] = field(default_factory=set)       # module names / self attrs of extensions
    ext_fn_aliases: dict[str, str] = field(default_factory=dict)  # alias -> ext function
    sources: list[str] = field(default_factory=list)       # cpp/cuda source strings
    functions: list[str] = field(default_factory=list)     # load_inline functions=[...]
    model_new: ast.ClassDef | None = None
    forward_nodes: list[ast.AST] = field(default_factory=list)  # forward + reached callees
    module_attrs: dict[str, list[str]] = field(default_factory=dict)  # self.x -> nn ctor names
    loader_fns: set[str] = field(default_factory=set)  # functions that return an extension
    graph: object = None                                # callgraph.Graph of the last walk
    eval_only_ext: set[int] = field(default_factory=set)  # ext-call lines run only in eval mode
    triton_kernels: set[str] = field(default_factory=set)  # @triton.jit functions
    ops: list[Op] = field(default_factory=list)
    syntax_error: str | None = None

    def ev(self, node: ast.AST) -> str:
        ln = getattr(node, "lineno", 0)
        text = self.lines[ln - 1].strip() if 0 < ln <= len(self.lines) else ""
        return f"L{ln}: {text[:120]}"


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``F.relu`` -> ``torch.nn.functional.relu`` given the import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(aliases.get(node.id, node.id))
    elif isinstance(node, ast.Call):
        inner = dotted(node.func, aliases)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):  # lin = F.linear / mm = torch.ops.aten.mm: aliases of torch ops
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            d = dotted(node.value, out)
            if d and d.startswith("torch."):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = d
    return out


def _strings(tree: ast.Module) -> dict[str, str]:
    """Every ``NAME = <string expression>`` in the file (any scope), evaluated statically."""
    env: dict[str, str] = {}

    def val(e: ast.AST) -> str | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            return e.value
        if isinstance(e, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "0" for v in e.values)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            a, b = val(e.left), val(e.right)
            return None if a is None or b is None else a + b
        if isinstance(e, ast.Name):
            return env.get(e.id)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in (
                "format", "replace", "strip", "lstrip"):
            return val(e.func.value)
        if isinstance(e, ast.List | ast.Tuple):
            parts = [val(x) for x in e.elts]
            return "\n".join(p for p in parts if p is not None)
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            v = val(node.value)
            if v is not None and isinstance(t, ast.Name):
                env[t.id] = v
    env["__val__"] = val  # type: ignore[assignment]
    return env


def _is_loader(d: str | None) -> bool:
    return bool(d) and d.split(".")[-1] in ("load_inline", "load", "compile_cuda_ext") and (
        "cpp_extension" in d or d in ("load_inline", "load"))


def extract(source: str) -> PyReport:
    rep = PyReport(lines=source.splitlines())
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        rep.syntax_error = f"line {e.lineno}: {e.msg}"
        return rep
    rep.tree = tree
    rep.aliases = al = _aliases(tree)
    env = _strings(tree)
    val = env.pop("__val__")
    loader_fns = rep.loader_fns
    for _ in range(3):  # helpers that build the extension, or call a helper that does
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name not in loader_fns:
                for r in ast.walk(fn):
                    if isinstance(r, ast.Call) and (_is_loader(dotted(r.func, al)) or
                                                    dotted(r.func, al) in loader_fns) and \
                            any(isinstance(x, ast.Return) and x.value is not None
                                for x in ast.walk(fn)):
                        loader_fns.add(fn.name)
                        break
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_loader(dotted(node.func, al)):
            for kw in node.keywords:
                if kw.arg in ("cpp_sources", "cuda_sources", "sources"):
                    s = val(kw.value)
                    if s:
                        rep.sources.append(s)
                elif kw.arg == "functions" and isinstance(kw.value, ast.List | ast.Tuple):
                    rep.functions += [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
            for a in node.args[1:3]:
                s = val(a)
                if s:
                    rep.sources.append(s)
    for _ in range(2):  # ext = load_inline(...) / = build() / = other_ext, at any scope
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not _is_ext_value(node.value, al, loader_fns, rep.ext_names):
                    continue
                for t in tgts:
                    name = t.id if isinstance(t, ast.Name) else (
                        "self." + t.attr if isinstance(t, ast.Attribute) else None)
                    if name:
                        rep.ext_names.add(name)
    for node in ast.walk(tree):  # fn = getattr(ext, "fn")
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                dotted(node.value.func, {}) == "getattr" and len(node.value.args) >= 2 and \
                isinstance(node.value.args[1], ast.Constant) and \
                _is_ext_value(node.value.args[0], al, loader_fns, rep.ext_names):
            for t in node.targets:
                name = t.id if isinstance(t, ast.Name) else (
                    "self." + t.attr if isinstance(t, ast.Attribute) else None)
                if name:
                    rep.ext_fn_aliases[name] = str(node.value.args[1].value)
    for node in ast.walk(tree):  # fn = ext.fn / self.fn = ext.fn / self.fn = self.ext.fn
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            base = dotted(node.value.value, {})
            if base in rep.ext_names or (base and base.replace("self.", "") in
                                         {n.replace("self.", "") for n in rep.ext_names}):
                for t in node.targets:
                    name = t.id if isinstance(t, ast.Name) else (
                        "self." + t.attr if isinstance(t, ast.Attribute) else None)
                    if name:
                        rep.ext_fn_aliases[name] = node.value.attr
    for fn in ast.walk(tree):  # Triton kernels: launched as kern[grid](...)
        if isinstance(fn, ast.FunctionDef) and any(
                (dotted(d.func if isinstance(d, ast.Call) else d, al) or "").startswith("triton.")
                for d in fn.decorator_list):
            rep.triton_kernels.add(fn.name)
    rep.model_new = _entry_class(tree)
    if rep.model_new is not None:
        callgraph.walk(rep)
    return rep


def _is_ext_value(e: ast.AST, al: dict, loader_fns: set[str], ext_names: set[str]) -> bool:
    """Does ``e`` evaluate to an extension module (a loader call, a helper, another handle)?"""
    if isinstance(e, ast.Call):
        d = dotted(e.func, al)
        return _is_loader(d) or d in loader_fns or (d or "").split(".")[-1] in loader_fns
    if isinstance(e, ast.Name | ast.Attribute):
        d = dotted(e, {})
        return d in ext_names or (d or "").startswith("self.") and d in ext_names
    if isinstance(e, ast.IfExp):
        return any(_is_ext_value(x, al, loader_fns, ext_names) for x in (e.body, e.orelse))
    if isinstance(e, ast.BoolOp):
        return any(_is_ext_value(x, al, loader_fns, ext_names) for x in e.values)
    return False


def _entry_class(tree: ast.Module) -> ast.ClassDef | None:
    """The class the evaluator instantiates: ``class ModelNew``; else ``ModelNew = SomeClass``;
    else a factory ``def ModelNew/Model(...)`` returning an instance of a program class (often
    through torch.compile/jit.script); else the program's own ``class Model`` (METR-style
    solutions name their entry point ``Model``)."""
    top = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" in top:
        return top["ModelNew"]
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew"
                                             for t in n.targets):
            if isinstance(n.value, ast.Name) and n.value.id in top:
                return top[n.value.id]
    for name in ("ModelNew", "Model"):
        fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name),
                  None)
        if fn is not None:
            for c in ast.walk(fn):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in top:
                    return top[c.func.id]
    return top.get("Model")

